#!/usr/bin/env bash
# Stage what scripts/device_llamacpp_gpu.sh needs on the GPU device into one ignored folder that the `run`
# tool carries (about 18 MB of its 64 MiB): llama.cpp's trimmed source, the console's wheels, the tiny
# model's GGUF and this checkout's frank tree (tracked and untracked-not-ignored files).
#
#   scripts/stage_device.sh [DEST]     (default .device/carry; run from the checkout's root)
#   then, on the device: mkdir -p /tmp/ft && tar -xzf .device/carry/frank-tree.tar.gz -C /tmp/ft &&
#                        bash /tmp/ft/scripts/device_llamacpp_gpu.sh
set -euo pipefail

DEST=${1:-.device/carry}
ENGINE_PY=${ENGINE_PY:-.venv-engine/bin/python}
mkdir -p "$DEST"
scripts/pack_llamacpp_source.sh .device
[ "$DEST" -ef .device ] || cp .device/llama.cpp-src.tar.gz "$DEST/"
scripts/device_wheels.sh "$DEST/wheels"
if [ ! -f "$DEST/tiny-frank.gguf" ]; then
    "$ENGINE_PY" scripts/make_tiny_gguf.py --out "$DEST/tiny-frank.gguf" | tail -1
fi
git ls-files -z -co --exclude-standard | tar -czf "$DEST/frank-tree.tar.gz" --null -T -
du -sh "$DEST"/llama.cpp-src.tar.gz "$DEST"/wheels "$DEST"/tiny-frank.gguf "$DEST"/frank-tree.tar.gz
