#!/usr/bin/env bash
# issue 21's first line, whole and fresh, on the GPU device's 16 CPU cores (the offline GPU machine: no
# network, Python 3.12): `frank engine start --profile llamacpp-cpu` (xllamacpp's CPU wheel, SmolLM2's
# GGUF), `frank engine status --json`, then `frank replay w01-mini --draws draw-1 --json`, which takes more
# than an hour on one thread of the 2-core development machine. What it needs is carried in folders that
# earlier calls left on the warm machine (each call carries at most 64 MiB):
#   FRANK_DEVICE_DIR  the frank tree (frank-tree.tar.gz, unpacked by the caller), the console's wheels
#                     (wheels/, scripts/device_wheels.sh) and the xllamacpp wheel (xllamacpp/)
#   FRANK_GPU_MODEL_PARTS  a glob over SmolLM2's GGUF in parts (smollm2.gguf.part-*)
# FRANK_CPU_KNOBS: knobs for the start (default "threads=8"). Results: $OUT/cpu-run.tar.gz and the log.
set -uo pipefail

TREE=$(cd "$(dirname "$0")/.." && pwd)
D=${FRANK_DEVICE_DIR:?the carried folder}
OUT=${OUT:-/tmp/frank-cpu-out}
W=${FRANK_CPU_WORK:-/tmp/frank-cpu}
LOG=$W/logs
rm -rf "$W" && mkdir -p "$LOG" "$OUT"
cd "$W" || exit 1 # not the checkout's root: `python3 -m frank...` would import the checkout's frank first
export FRANK_HOME=$W/home FRANK_MODELS=$W/models PYTHONUNBUFFERED=1 PYTHONPATH=$TREE:$W/site
frank() { python3 -m frank.console.cli "$@"; }
stamp() { echo "== $(date -u +%H:%M:%S) [$SECONDS s] $*"; }
finish() {
    stamp "stop"
    frank engine stop --json >"$LOG/engine-stop.json" 2>&1
    cp -r "$FRANK_HOME/state" "$LOG/frank-state" 2>/dev/null
    cp -r "$FRANK_HOME/data/runs/replays" "$LOG/replays" 2>/dev/null
    tar -czf "$OUT/cpu-run.tar.gz" -C "$W" logs
    cp "$LOG/run.log" "$OUT/run.log"
}
trap finish EXIT
trap "exit 143" TERM INT
exec > >(tee "$LOG/run.log") 2>&1

stamp "env"
{ python3 --version; nproc; lscpu | grep -E 'Model name|^CPU\(s\)'; } | tee "$LOG/env.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$W/site" "$D"/wheels/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$W/xl" "$D"/xllamacpp/*.whl || exit 1
# the llama.cpp "venv": the device's python with the wheel on its path (FRANK_LLAMACPP_PYTHON)
printf '#!/bin/sh\nPYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH} exec python3 "$@"\n' "$W/xl" >"$W/llamacpp-python"
chmod +x "$W/llamacpp-python"
export FRANK_LLAMACPP_PYTHON=$W/llamacpp-python

GGUF=$FRANK_MODELS/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf
# shellcheck disable=SC2206  # a glob, in order: the parts may lie in several carried folders
parts=(${FRANK_GPU_MODEL_PARTS:?the GGUF parts})
mkdir -p "$(dirname "$GGUF")" && cat "${parts[@]}" >"$GGUF" && sha256sum "$GGUF" || exit 1

KNOBS=()
for k in ${FRANK_CPU_KNOBS:-threads=8}; do KNOBS+=(--knob "$k"); done
stamp "frank engine start --profile llamacpp-cpu ${KNOBS[*]}"
frank engine start --profile llamacpp-cpu "${KNOBS[@]}" --dry-run | tee "$LOG/engine-dry-run.txt"
frank engine start --profile llamacpp-cpu "${KNOBS[@]}" --json | tee "$LOG/engine-start.json" || {
    frank engine logs -n 60
    exit 1
}
frank engine status --json | tee "$LOG/engine-status.json"

stamp "frank replay w01-mini --draws draw-1 --json"
frank replay w01-mini --draws draw-1 --json >"$LOG/replay-w01-mini.json" 2>"$LOG/replay-w01-mini.err"
echo "replay exit $?"
tail -3 "$LOG/replay-w01-mini.err"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(json.dumps(r["totals"], indent=1))' \
    "$LOG/replay-w01-mini.json"
frank engine status --json >"$LOG/engine-status-after.json"
stamp "done"
