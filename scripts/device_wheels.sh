#!/usr/bin/env bash
# The console's wheels for the GPU device, whose Python (3.12, x86-64) reaches no package index: downloaded
# here, carried there, installed with `pip install --no-index`. The versions are the console venv's
# (.venv, from pyproject.toml); the device image already has numpy, scipy and their kind, so only the pure
# Python packages and psutil travel (about 5 MB).
#
#   scripts/device_wheels.sh [DEST]     (default .device/wheels; idempotent)
set -euo pipefail

DEST=${1:-.device/wheels}
PY=${PY:-python3}
PINS=(
    textual==8.2.8 rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2 mdit-py-plugins==0.7.0
    linkify-it-py==2.2.0 uc-micro-py==1.0.3 platformdirs==4.14.9 pygments==2.21.0
    typing-extensions==4.16.0 tomli-w==1.2.0 nvidia-ml-py==13.615.71 httpx==0.28.1 httpcore==1.0.9
    h11==0.16.0 anyio==4.16.0 idna==3.20 certifi==2026.10.19.post1 sniffio==1.3.1
    prometheus-client==0.26.0 psutil==7.2.2
)
mkdir -p "$DEST"
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$DEST" "${PINS[@]}"
echo "$DEST: $(ls "$DEST" | wc -l) wheels, $(du -sh "$DEST" | cut -f1)"
