#!/usr/bin/env bash
# SmolLM2-135M's GGUF side of the seed's fidelity row, by llama.cpp's own tools on the CPU: Q4_K_M, and
# IQ2_XXS with an importance matrix (llama-quantize refuses IQ2_XXS without one). Both requantize the Q4_1
# GGUF that `frank model build --model smollm2-135m` derives its float32 checkpoint from (--allow-requantize):
# that checkpoint IS the Q4_1 weights dequantized, so quantizing the GGUF and quantizing the fidelity reference
# give the same weights, and the tokenizer stays the served one. The importance matrix is computed over the
# calibration text exllamav3's converter uses by default (its wheel's standard_cal_data: c4, code, wiki,
# technical), so the GGUF and EXL3 sides are calibrated on the same text. Then a llama.cpp profile per
# quantization (the llamacpp-cpu profile with the model replaced, context 8192 as trained and no speculation
# by default) in FRANK_HOME's profiles, for
# `frank fidelity floor --profile smollm2-q4km|smollm2-iq2xxs`.
#
#   scripts/quantize_smollm2.sh [MODEL_DIR]   (default: the models dir's smollm2-135m; idempotent)
#
# Needs `make llamacpp-quantize exl3-wheel` (FRANK_QUANTIZE_BIN overrides where the two tools are).
set -euo pipefail

TREE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$TREE/.venv/bin/python}
DIR=${1:-$("$PY" -c 'from frank import paths; print(paths.models_dir() / "smollm2-135m")')}
BIN=${FRANK_QUANTIZE_BIN:-$TREE/.device/llama-quantize/bin}
WHEEL=${FRANK_EXL3_WHEEL:-$TREE/.device/exl3/exllamav3-1.6.5-py3-none-any.whl}
THREADS=${FRANK_QUANTIZE_THREADS:-2}
CHUNKS=${FRANK_IMATRIX_CHUNKS:-40}
SRC=$DIR/SmolLM2-135M-Instruct.Q4_1.gguf
for need in "$SRC" "$BIN/llama-quantize" "$BIN/llama-imatrix" "$WHEEL"; do
    [ -e "$need" ] || { echo "$need: missing (frank model build --model smollm2-135m; make llamacpp-quantize exl3-wheel)" >&2; exit 2; }
done
LOG=$DIR/quantize-logs
mkdir -p "$LOG"

if [ ! -s "$DIR/calibration.txt" ]; then  # 300 K characters of each of four, in exllamav3's order
    "$PY" - "$WHEEL" "$DIR/calibration.txt.tmp" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as zf, open(sys.argv[2], "w", encoding="utf-8") as out:
    for part in ("c4", "code", "wiki", "technical"):
        out.write(zf.read(f"exllamav3/conversion/standard_cal_data/{part}.utf8").decode()[:300_000] + "\n")
PY
    mv "$DIR/calibration.txt.tmp" "$DIR/calibration.txt"
fi
quantize() {  # TYPE OUT [--imatrix FILE]
    local type=$1 out=$2
    shift 2
    [ -s "$out" ] && return 0
    "$BIN/llama-quantize" --allow-requantize "$@" "$SRC" "$out.tmp" "$type" "$THREADS" >"$LOG/$type.log" 2>&1
    mv "$out.tmp" "$out"
}
quantize Q4_K_M "$DIR/smollm2-135m-Q4_K_M.gguf"   # needs no importance matrix
if [ ! -s "$DIR/imatrix.gguf" ]; then
    "$BIN/llama-imatrix" -m "$SRC" -f "$DIR/calibration.txt" -o "$DIR/imatrix.tmp.gguf" -c 512 \
        --chunks "$CHUNKS" -t "$THREADS" >"$LOG/imatrix.log" 2>&1
    mv "$DIR/imatrix.tmp.gguf" "$DIR/imatrix.gguf"   # (the .gguf suffix: llama-imatrix picks its format by it)
fi
quantize IQ2_XXS "$DIR/smollm2-135m-IQ2_XXS.gguf" --imatrix "$DIR/imatrix.gguf"

# A profile per quantization: llamacpp-cpu's, serving that GGUF (its reference: the checkpoint beside it).
"$PY" - "$DIR" <<'PY'
import re, sys
from pathlib import Path
from frank import paths
from frank.engine.profiles import BUILTIN_DIR, load_profile

base = (BUILTIN_DIR / "llamacpp-cpu.toml").read_text()
out = paths.user_profiles_dir()
out.mkdir(parents=True, exist_ok=True)
for name, quant in (("smollm2-q4km", "Q4_K_M"), ("smollm2-iq2xxs", "IQ2_XXS")):
    text = re.sub(r'(?m)^name = .*$', f'name = "{name}"', base, count=1)
    text = re.sub(r'(?m)^model = .*$', f'model = "@models/smollm2-135m/smollm2-135m-{quant}.gguf"', text, count=1)
    text = re.sub(r'(?m)^description = .*$', f'description = "llama.cpp (xllamacpp) serving SmolLM2-135M {quant}"', text, count=1)
    # measured as trained: no YaRN stretch (it changes every position), no speculation
    text = text.replace("default = 32768", "default = 8192").replace('default = "ngram-simple"', 'default = "none"')
    (out / f"{name}.toml").write_text(text)
    print(f"profile {load_profile(name).name}: {load_profile(name).model_path()}")
PY
ls -l "$DIR"/smollm2-135m-*.gguf "$DIR/imatrix.gguf"
grep -h -E "model size|quant size|using fallback|type .*: *[0-9]+ tensors" "$LOG"/Q4_K_M.log "$LOG"/IQ2_XXS.log | sort | uniq -c | head -20
