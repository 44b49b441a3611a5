#!/usr/bin/env bash
# Stage what scripts/device_moe_campaign.sh needs on the GPU machine into one folder carried there
# beside the checkout's tree (53 MB of the 64 MiB a call can carry with the parts, 15 MB with the source):
# llama.cpp's converter alone (its convert_hf_to_gguf.py, conversion/ and gguf-py: the model is drawn and
# converted there), the console's wheels, frank-moe-gpu's kit (state-dict shapes and tokenizer) and, when
# BIN_PARTS names them, the CUDA llama-server an earlier call built there. Without BIN_PARTS, llama.cpp's
# source: the first call builds llama-server from it and sends its bin/ back as llama-bin.part-*, so no
# later call has to build it again.
#
#   BIN_PARTS=DIR scripts/stage_cpu_experts_device.sh DEST      (from the checkout's root; DEST e.g. .device/i32)
set -euo pipefail

DEST=${1:?usage: BIN_PARTS=DIR scripts/stage_cpu_experts_device.sh DEST}
ENGINE_PY=${ENGINE_PY:-.venv-engine/bin/python}
mkdir -p "$DEST"
scripts/pack_llamacpp_source.sh .device >/dev/null
SRC=.device/src/llama_cpp_python-0.3.36/vendor/llama.cpp
tar -czf "$DEST/llama.cpp-convert.tar.gz" -C "$SRC" convert_hf_to_gguf.py conversion gguf-py
scripts/device_wheels.sh "$DEST/wheels" >/dev/null
KIT=$DEST/kit-frank-moe-gpu
[ -f "$KIT/shapes.json" ] || PYTHONPATH=$PWD "$ENGINE_PY" -m frank.engine.models.moe_model kit --model frank-moe-gpu --out "$KIT"
if [ -n "${BIN_PARTS:-}" ]; then cp "$BIN_PARTS"/llama-bin.part-* "$DEST/"; else cp .device/llama.cpp-src.tar.gz "$DEST/"; fi
du -sh "$DEST"/* "$DEST"
