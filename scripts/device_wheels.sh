#!/usr/bin/env bash
# The console's wheels for the GPU device, whose Python (3.12, x86-64) reaches no package index: downloaded
# here, carried there, installed with `pip install --no-index`. The list is scripts/device-wheels.txt (the
# console venv's versions of what the GPU image lacks; tests/unit/test_device_wheels.py keeps it whole).
#
#   scripts/device_wheels.sh [DEST]     (default .device/wheels; idempotent)
set -euo pipefail

DEST=${1:-.device/wheels}
PY=${PY:-python3}
mapfile -t PINS < <(grep -v '^#' "$(dirname "$0")/device-wheels.txt" | grep .)
mkdir -p "$DEST"
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$DEST" "${PINS[@]}"
echo "$DEST: $(ls "$DEST" | wc -l) wheels, $(du -sh "$DEST" | cut -f1)"
