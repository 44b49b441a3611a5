#!/usr/bin/env bash
# The seed's engine shape on a GPU, ON the GPU machine (no network, Python 3.12 with torch): llama.cpp's CUDA
# llama-server built from the carried source, the GPU-size DeepSeek-V4-shaped MoE (frank-moe-gpu, 2.6 GB of
# MXFP4 experts) and its DSpark draft built there, `llamacpp-gpu-moe` started through frank, telemetry and a
# W01 mini replay recorded, the sampler's own CPU measured beside a busy 16-thread pool, and the CPU-expert
# table (benchmarks/bench_cpu_experts.py). scripts/stage_moe_device.sh makes the carried folder here.
#
#   FRANK_MOE_STEP=build  builds llama-server (its bin/ comes back in $OUT as llama-bin.part-*, to carry into
#                         later calls) and the model, and serves one request: about 6 minutes
#   FRANK_MOE_STEP=run    (default) everything else, with the build from the carried parts (or, on a machine
#                         still warm from the build call, from $W): about 6 minutes
#
#   run: mkdir -p /tmp/ft && tar -xzf .device/i31/frank-tree.tar.gz -C /tmp/ft &&
#        FRANK_DEVICE_DIR=$PWD/.device/i31 FRANK_MOE_STEP=build bash /tmp/ft/scripts/device_llamacpp_moe.sh
#
# Everything stays in $W (/tmp/frank-moe), which a warm machine keeps between calls: a later call skips what
# is already there (the build, the model). A dry run here, on the CPU wheel (mechanics only; no CUDA build):
#   FRANK_MOE_PROFILE=llamacpp-cpu-moe FRANK_MOE_MODEL=tiny-frank-moe FRANK_LLAMA_SERVER=none \
#   FRANK_MOE_PYTHON=.venv/bin/python FRANK_MOE_MODEL_PYTHON=.venv-engine/bin/python FRANK_MOE_THREADS=2 \
#   FRANK_MOE_ALL_LAYERS=6 FRANK_MOE_BUSY_THREADS=2 bash scripts/device_llamacpp_moe.sh
set -uo pipefail

TREE=$(cd "$(dirname "$0")/.." && pwd)
D=${FRANK_DEVICE_DIR:-$PWD/.device/i31}
OUT=${OUT:-/tmp/frank-moe-out}
STEP=${FRANK_MOE_STEP:-run}
W=${FRANK_MOE_WORK:-/tmp/frank-moe}
PROFILE=${FRANK_MOE_PROFILE:-llamacpp-gpu-moe}
MODEL=${FRANK_MOE_MODEL:-frank-moe-gpu}
THREADS=${FRANK_MOE_THREADS:-4 8 16}
LOG=$W/logs-$STEP
rm -rf "$LOG" && mkdir -p "$LOG" "$OUT" "$W/models"
cd "$W" || exit 1
export FRANK_HOME=$W/home-$STEP FRANK_MODELS=$W/models PYTHONUNBUFFERED=1 PYTHONPATH=$TREE:$W/site
export FRANK_LLAMACPP_SRC=$W/llama.cpp
PY=$(command -v "${FRANK_MOE_PYTHON:-python3}")           # frank's console side (the device: its python3)
MODEL_PY=$(command -v "${FRANK_MOE_MODEL_PYTHON:-$PY}")   # torch for the model build
frank() { "$PY" -m frank.console.cli "$@"; }
stamp() { echo "== $(date -u +%H:%M:%S) [$SECONDS s] $*"; }

finish() {
    stamp "stop"
    frank engine stop --json >"$LOG/engine-stop.json" 2>&1
    cp -r "$FRANK_HOME/state/logs" "$LOG/engine-logs" 2>/dev/null
    tar -czf "$OUT/moe-$STEP.tar.gz" -C "$W" "logs-$STEP"
    cp "$LOG/run.log" "$OUT/run-$STEP.log"
}
trap finish EXIT
trap "exit 143" TERM INT
exec > >(tee "$LOG/run.log") 2>&1

stamp "env ($STEP)"
{ nproc; nvidia-smi -L; "$MODEL_PY" -c 'import sys, torch, transformers, numpy
print(sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "numpy", numpy.__version__)'
  cmake --version | head -1; nvcc --version | tail -1; } 2>&1 | tee "$LOG/env.txt"

if ! "$PY" -c 'import textual, psutil, httpx, pynvml' 2>/dev/null; then
    stamp "frank's wheels (no index)"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$W/site" "$D"/wheels/*.whl || exit 1
fi
if [ ! -f "$W/llama.cpp/conversion/deepseek.py" ] || [ ! -d "$W/llama.cpp/gguf-py" ]; then
    mkdir -p "$W/llama.cpp" && tar -xzf "$D/llama.cpp-src.tar.gz" -C "$W/llama.cpp" &&
        tar -xzf "$D/llama.cpp-gguf-py.tar.gz" -C "$W/llama.cpp" || exit 1
fi

# llama-server: given, built in an earlier call on this machine, carried as parts, or built now (beside the model)
BIN=${FRANK_LLAMA_SERVER:-}
BUILD_PID=
if [ -z "$BIN" ] && [ -x "$W/build/bin/llama-server" ]; then BIN=$W/build/bin/llama-server; fi
if [ -z "$BIN" ] && compgen -G "$D/llama-bin.part-*" >/dev/null; then
    stamp "llama-server from the carried build"
    mkdir -p "$W/build" && cat "$D"/llama-bin.part-* | tar -xz -C "$W/build" && BIN=$W/build/bin/llama-server
fi
if [ -z "$BIN" ]; then
    stamp "build llama-server (CUDA, sm_90) in the background"
    (cmake -S "$W/llama.cpp" -B "$W/build" -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF &&
        ninja -C "$W/build" -j"$(nproc)" llama-server) >"$LOG/build.log" 2>&1 &
    BUILD_PID=$!
    BIN=$W/build/bin/llama-server
fi

if ! frank model verify --model "$MODEL" --json >/dev/null 2>&1; then
    stamp "build $MODEL (with $D/kit-$MODEL where there is one: shapes and tokenizer)"
    KIT=(); [ -f "$D/kit-$MODEL/shapes.json" ] && KIT=(--kit "$D/kit-$MODEL")
    ( time "$MODEL_PY" -m frank.engine.models.moe_model build --model "$MODEL" --out "$FRANK_MODELS/$MODEL" "${KIT[@]}" ) \
        >"$LOG/model-build.json" 2>"$LOG/model-build.err" || { tail -30 "$LOG/model-build.err"; exit 1; }
    cat "$LOG/model-build.json"; tail -3 "$LOG/model-build.err"
fi
ls -la "$FRANK_MODELS/$MODEL"
frank model verify --model "$MODEL" --json | tee "$LOG/model-verify.json"

if [ -n "$BUILD_PID" ]; then
    wait "$BUILD_PID" || { tail -40 "$LOG/build.log"; exit 1; }
    stamp "built"; ls -la "$W/build/bin"
    tar -czf - -C "$W/build" bin | split -b 15000000 - "$OUT/llama-bin.part-"
    ls -la "$OUT"/llama-bin.part-*
fi
[ "$BIN" = none ] || { export FRANK_LLAMA_SERVER=$BIN; "$BIN" --version 2>&1 | tail -2; }

stamp "serve $MODEL through $PROFILE"
frank engine start --profile "$PROFILE" --dry-run | tee "$LOG/engine-dry-run.txt"
frank engine start --profile "$PROFILE" --json >"$LOG/engine-start.json"
rc=$?; cat "$LOG/engine-start.json"; [ $rc = 0 ] || { frank engine logs -n 60; exit 1; }
read -r URL TOKEN < <("$PY" -c 'from frank.engine.controller import EngineController as C
c = C(); print(c.status().url, c.client_api_key or "")')
"$PY" - "$URL" "$TOKEN" <<'PY' | tee "$LOG/smoke.json"
import json, sys, httpx
url, key = sys.argv[1:]
h = {"Authorization": f"Bearer {key}"}
body = {"messages": [{"role": "user", "content": "Write a merge function."}], "max_tokens": 64, "temperature": 0,
        "ignore_eos": True}
r = httpx.post(url + "/v1/chat/completions", json=body, headers=h, timeout=300).json()
print(json.dumps({"timings": r.get("timings"), "usage": r.get("usage")}))
PY
nvidia-smi --query-compute-apps=pid,used_memory --format=csv 2>&1 | tee "$LOG/nvidia-smi-apps.csv"
frank telemetry --once --json >"$LOG/telemetry-idle.json"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d["expert_pool"]))' "$LOG/telemetry-idle.json"
[ "$STEP" = build ] && { stamp "build step done"; exit 0; }

stamp "telemetry (0.5 s) beside a W01 mini replay and a load"
"$PY" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
    "$PY" -m frank.console.cli telemetry --period 0.5 --json >"$LOG/telemetry.json" &
TEL_PID=$!
sleep 2
frank replay w01-mini --draws draw-1 --limit 5 --mode full --max-tokens 64 --json >"$LOG/replay-w01-mini.json" 2>"$LOG/replay-w01-mini.err"
echo "replay exit $?"; tail -2 "$LOG/replay-w01-mini.err"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d["draws"]["draw-1"]))' "$LOG/replay-w01-mini.json"
"$PY" "$TREE/scripts/gpu_load.py" --duration 12 --workers 1 --max-tokens 256 --url "$URL" --api-key "$TOKEN" >"$LOG/load.json" &
LOAD_PID=$!; sleep 6
frank telemetry --once --json --period 1 >"$LOG/telemetry-load.json"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d["expert_pool"])); print(json.dumps(d["gpus"][:1]))' "$LOG/telemetry-load.json"
wait "$LOAD_PID"; kill -INT "$TEL_PID"; wait "$TEL_PID"

stamp "the sampler's CPU beside a busy 16-thread pool (every layer's experts on the CPU)"
frank engine stop --json >/dev/null
frank engine start --profile "$PROFILE" --knob cpu_moe_layers="${FRANK_MOE_ALL_LAYERS:-12}" --knob cpu_threads="${FRANK_MOE_BUSY_THREADS:-16}" --json >"$LOG/engine-busy.json" || exit 1
"$PY" "$TREE/scripts/gpu_load.py" --duration 32 --workers 1 --max-tokens 512 >"$LOG/load-busy.json" &
LOAD_PID=$!; sleep 1
"$PY" "$TREE/scripts/sampler_cost.py" --seconds 20 --warmup 4 --out "$LOG/sampler-cost.json"
wait "$LOAD_PID"
frank engine stop --json >/dev/null

stamp "the CPU-expert table"
# shellcheck disable=SC2086  # the thread counts are words
"$PY" "$TREE/benchmarks/bench_cpu_experts.py" --profile "$PROFILE" --threads $THREADS --requests "${FRANK_MOE_REQUESTS:-2}" \
    --max-tokens 64 --json "$LOG/bench.json" 2>"$LOG/bench.err" | tee "$LOG/bench.txt"
stamp "done"
