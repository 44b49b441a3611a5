#!/usr/bin/env bash
# frank beside a GPU llama.cpp engine, ON the GPU device (the offline GPU machine: no network, Python 3.12).
# Builds llama-server with CUDA from the carried source, serves the tiny model's GGUF on the GPU, and runs
# frank against it: telemetry (NVML + the engine's /metrics), the dashboard (headless, saved as SVG) and a
# W01 mini replay, all with frank's own CLI. Everything it needs travels in .device/carry (scripts/stage_device.sh
# makes it here); the results come back as $OUT/gpu-run.tar.gz plus the dashboard SVG and the log.
#
#   run: mkdir -p /tmp/ft && tar -xzf .device/carry/frank-tree.tar.gz -C /tmp/ft && bash /tmp/ft/scripts/device_llamacpp_gpu.sh
#
# FRANK_GPU_MODE=profile (default): `frank engine start --profile llamacpp-gpu`, frank's supervisor owns
# the server. FRANK_GPU_MODE=raw: llama-server started here by hand, frank pointed at its URL (--url).
# FRANK_LLAMA_SERVER=PATH skips the build (a local dry run with a llama-server-compatible stand-in);
# FRANK_GPU_REPLAY_EXTRA adds replay flags there (--limit 5). FRANK_GPU_KNOBS: knobs for the start
# ("gpu_split=layer" on the two-GPU machine: docs/gpu-run.md, "Two GPUs").
# FRANK_GPU_PROFILE=llamacpp-gpu-smollm2 serves SmolLM2's GGUF instead of the tiny model's: the GGUF travels
# in parts (smollm2.gguf.part-*, over the carry limit whole), from this folder or from FRANK_GPU_MODEL_PARTS
# (a glob over earlier calls' carried folders, still on the machine).
set -uo pipefail

TREE=$(cd "$(dirname "$0")/.." && pwd)      # the frank tree unpacked from .device/carry/frank-tree.tar.gz
D=${FRANK_DEVICE_DIR:-$PWD/.device/carry}
OUT=${OUT:-/tmp/frank-gpu-out}
MODE=${FRANK_GPU_MODE:-profile}
KNOBS=(); for k in ${FRANK_GPU_KNOBS:-}; do KNOBS+=(--knob "$k"); done
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # the two-GPU machine's rule
PROFILE=${FRANK_GPU_PROFILE:-llamacpp-gpu}
W=${FRANK_GPU_WORK:-/tmp/frank-gpu}
LOAD_S=${FRANK_GPU_LOAD_S:-40}            # the generation load after the replay (telemetry records both)
LOG=$W/logs
rm -rf "$W" && mkdir -p "$LOG" "$OUT"
cd "$W" || exit 1   # not the checkout's root: `python3 -m frank...` would import the checkout's frank first
export FRANK_HOME=$W/home FRANK_MODELS=$W/models PYTHONUNBUFFERED=1 PYTHONPATH=$TREE:$W/site
frank() { python3 -m frank.console.cli "$@"; }
stamp() { echo "== $(date -u +%H:%M:%S) [$SECONDS s] $*"; }
# GET URL [TOKEN] to stdout, non-zero unless 200 (the image may have no curl)
http_get() {
    python3 -c 'import sys, urllib.request as u
r = u.Request(sys.argv[1], headers={"Authorization": "Bearer " + sys.argv[2]} if len(sys.argv) > 2 else {})
sys.stdout.write(u.urlopen(r, timeout=5).read().decode())' "$@" 2>/dev/null
}

SERVER_PID=
finish() {
    stamp "stop"
    if [ "$MODE" = profile ]; then frank engine stop --json >"$LOG/engine-stop.json" 2>&1; fi
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; fi
    cp -r "$FRANK_HOME/state" "$LOG/frank-state" 2>/dev/null
    cp "$LOG/dashboard-gpu.svg" "$OUT/" 2>/dev/null
    tar -czf "$OUT/gpu-run.tar.gz" -C "$W" logs
    cp "$LOG/run.log" "$OUT/run.log"
}
trap finish EXIT
trap "exit 143" TERM INT
exec > >(tee "$LOG/run.log") 2>&1

stamp "env (mode $MODE)"
{
    python3 --version; nproc; nvidia-smi; cmake --version | head -1; nvcc --version | tail -1
    gcc --version | head -1; python3 -m pip --version
} >"$LOG/env.txt" 2>&1
cat "$LOG/env.txt"

stamp "frank's wheels (no index)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$W/site" "$D"/wheels/*.whl || exit 1
python3 -c 'import textual, pynvml, frank.telemetry.sampler; print("textual", textual.__version__)' || exit 1

BIN=${FRANK_LLAMA_SERVER:-}
if [ -z "$BIN" ] && compgen -G "$D/llama-bin.part-*" >/dev/null; then
    stamp "llama-server from an earlier call's build ($D/llama-bin.part-*)"
    mkdir -p "$W/build" && cat "$D"/llama-bin.part-* | tar -xz -C "$W/build" && BIN=$W/build/bin/llama-server
fi
if [ -z "$BIN" ]; then
    stamp "build llama-server (CUDA, sm_90)"
    mkdir -p "$W/llama.cpp" && tar -xzf "$D/llama.cpp-src.tar.gz" -C "$W/llama.cpp"
    cmake -S "$W/llama.cpp" -B "$W/build" -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        >"$LOG/build.log" 2>&1 || { tail -40 "$LOG/build.log"; exit 1; }
    ninja -C "$W/build" -j"$(nproc)" llama-server >>"$LOG/build.log" 2>&1 || { tail -60 "$LOG/build.log"; exit 1; }
    BIN=$W/build/bin/llama-server
    ls -la "$W/build/bin"
    # the build (bin/: llama-server and its libraries, about 49 MB packed) comes back in 15 MB parts: carried
    # into .device/carry, a later call skips the 5-minute build
    tar -czf - -C "$W/build" bin | split -b 15000000 - "$OUT/llama-bin.part-"
    ls -la "$OUT"/llama-bin.part-*
fi
"$BIN" --version 2>&1 | tail -3

# llamacpp-gpu serves @models/tiny-frank.gguf; llamacpp-gpu-smollm2 the file llamacpp-cpu serves
mkdir -p "$FRANK_MODELS"
if [ "$PROFILE" = llamacpp-gpu-smollm2 ]; then
    GGUF=$FRANK_MODELS/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf
    # shellcheck disable=SC2206  # a glob, in order: the parts may lie in several carried folders
    parts=(${FRANK_GPU_MODEL_PARTS:-$D/smollm2.gguf.part-*})
    mkdir -p "$(dirname "$GGUF")" && cat "${parts[@]}" >"$GGUF" || exit 1
    sha256sum "$GGUF"
else
    GGUF=$FRANK_MODELS/tiny-frank.gguf
    cp "$D/tiny-frank.gguf" "$GGUF"
fi
MODEL=$(python3 -c 'import sys; from frank.engine.profiles import load_profile
print(load_profile(sys.argv[1]).served_model_name)' "$PROFILE") || exit 1
stamp "serve $GGUF"
if [ "$MODE" = raw ]; then
    TOKEN=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    URL=http://127.0.0.1:$PORT
    "$BIN" -m "$GGUF" --alias "$MODEL" -ngl 99 -c 262144 --jinja --metrics \
        --host 127.0.0.1 --port "$PORT" --api-key "$TOKEN" >"$LOG/server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 120); do
        http_get "$URL/health" >/dev/null && break
        kill -0 "$SERVER_PID" 2>/dev/null || { tail -30 "$LOG/server.log"; exit 1; }
        sleep 0.5
    done
    TARGET=(--url "$URL" --pid "$SERVER_PID" --api-key "$TOKEN" --model "$MODEL")
    REPLAY_TARGET=(--url "$URL" --api-key "$TOKEN" --model "$MODEL")
    echo "llama-server pid $SERVER_PID at $URL"
else
    export FRANK_LLAMA_SERVER=$BIN
    frank engine start --profile "$PROFILE" "${KNOBS[@]}" --dry-run | tee "$LOG/engine-dry-run.txt"
    frank engine start --profile "$PROFILE" "${KNOBS[@]}" --json >"$LOG/engine-start.json"
    rc=$?; cat "$LOG/engine-start.json"; [ $rc = 0 ] || { frank engine logs -n 40; exit 1; }
    TARGET=()
    REPLAY_TARGET=()
    read -r URL TOKEN < <(python3 -c 'from frank.engine.controller import EngineController as C
c = C(); print(c.status().url, c.client_api_key or "")')
fi
frank engine status --json >"$LOG/engine-status.json" 2>&1
cat "$LOG/engine-status.json"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv | tee "$LOG/nvidia-smi-apps.csv"

stamp "telemetry, one sample, engine idle"
frank telemetry --once "${TARGET[@]}" | tee "$LOG/telemetry-idle.txt"
frank telemetry --once --json "${TARGET[@]}" >"$LOG/telemetry-idle.json"

stamp "telemetry (0.5 s period) and the dashboard, beside the replay and then a load"
# until Ctrl-C (SIGINT), then one JSON object: a background job of a script ignores SIGINT unless reset
python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
    python3 -m frank.console.cli telemetry --period 0.5 --json "${TARGET[@]}" >"$LOG/telemetry.json" &
TEL_PID=$!
python3 "$TREE/scripts/dashboard_shot.py" --out "$LOG/dashboard-gpu.svg" --busy-file "$W/load-on" \
    --hold 15 --timeout 400 "${TARGET[@]}" >"$LOG/dashboard.log" 2>&1 &
DASH_PID=$!
sleep 3

stamp "replay w01-mini draw-1 (engine mode: one output token per request)"
frank replay w01-mini --draws draw-1 --json "${REPLAY_TARGET[@]}" ${FRANK_GPU_REPLAY_EXTRA:-} >"$LOG/replay-w01-mini.json" 2>"$LOG/replay-w01-mini.err"
echo "replay exit $?"; tail -3 "$LOG/replay-w01-mini.err"; cat "$LOG/replay-w01-mini.json"

stamp "load: 2 clients, 512-token chat completions, for $LOAD_S s (the engine's own timings)"
(   # what `frank telemetry` prints 20 s into the load
    while [ ! -e "$W/load-on" ]; do sleep 0.2; done
    sleep 20; frank telemetry --once "${TARGET[@]}" >"$LOG/telemetry-load.txt" 2>&1
) &
MID_PID=$!
python3 "$TREE/scripts/gpu_load.py" --duration "$LOAD_S" --workers 2 --max-tokens 512 --url "$URL" \
    --api-key "$TOKEN" --start-file "$W/load-on" | tee "$LOG/load.json"
wait "$MID_PID"; cat "$LOG/telemetry-load.txt"
wait "$DASH_PID"; echo "dashboard exit $?"; cat "$LOG/dashboard.log"
kill -INT "$TEL_PID"; wait "$TEL_PID"; echo "telemetry exit $?"

stamp "after the load: one telemetry sample, the engine's /metrics"
frank telemetry --once "${TARGET[@]}" | tee "$LOG/telemetry-after.txt"
http_get "$URL/metrics" "$TOKEN" >"$LOG/metrics.txt"
[ "$MODE" = raw ] || { frank engine status --json >"$LOG/engine-status-after.json"; frank engine logs -n 400 >"$LOG/engine-log.txt"; }
python3 "$TREE/scripts/summarize_gpu_run.py" "$LOG" | tee "$LOG/summary.txt"
stamp "done"
