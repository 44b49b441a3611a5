#!/usr/bin/env bash
# Stage what scripts/device_llamacpp_moe.sh needs on the GPU machine into one folder carried there
# (about 16 MB of the 64 MiB a call can carry): llama.cpp's trimmed source, its converter's gguf-py (the trimmed source leaves
# it out), the console's wheels, the GPU-size MoE's kit (state-dict shapes and tokenizer: the GPU machine's
# transformers may not know DeepSeek-V4) and this checkout's frank tree.
#
#   scripts/stage_moe_device.sh DEST          (run from the checkout's root; DEST e.g. /work/main/.device/i31)
#   then, on the device: mkdir -p /tmp/ft && tar -xzf DEST/frank-tree.tar.gz -C /tmp/ft &&
#                        FRANK_DEVICE_DIR=DEST bash /tmp/ft/scripts/device_llamacpp_moe.sh
set -euo pipefail

DEST=${1:?usage: scripts/stage_moe_device.sh DEST}
ENGINE_PY=${ENGINE_PY:-.venv-engine/bin/python}
mkdir -p "$DEST"
scripts/pack_llamacpp_source.sh .device >/dev/null
SRC=.device/src/llama_cpp_python-0.3.36/vendor/llama.cpp
cp .device/llama.cpp-src.tar.gz "$DEST/"
tar -czf "$DEST/llama.cpp-gguf-py.tar.gz" -C "$SRC" gguf-py
scripts/device_wheels.sh "$DEST/wheels" >/dev/null
KIT=$DEST/kit-frank-moe-gpu
[ -f "$KIT/shapes.json" ] || PYTHONPATH=$PWD "$ENGINE_PY" -m frank.engine.models.moe_model kit --model frank-moe-gpu --out "$KIT"
git ls-files -z -co --exclude-standard | tar -czf "$DEST/frank-tree.tar.gz" --null -T -
du -sh "$DEST"/* "$DEST"
