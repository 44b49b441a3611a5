#!/usr/bin/env bash
# The seed's region-cache test on a GPU engine, ON the GPU machine: frank registers
# frank/experiments/designs/region-cache-gpu.toml (4 + 4 starts of `embedded-gpu`, vLLM 0.26.0's CUDA build,
# full-scale W01) and runs it detached; a call there lasts at most 10 minutes, so each call runs the cells
# that fit (`frank experiment run --detach --stop-after S`: the runner stops between cells) and the next
# call resumes the same run from its journal. The console's dashboard and experiments screen are saved
# mid-run (scripts/console_shots.py). Once the run is finished: its report (JSON, text, HTML with plots),
# its CSV for `frank experiment analyze`, `frank bench part --list --json` on this vLLM, and, while time
# is left, the per-request front end against the empty-region floor (benchmarks/profile_region_cache_engine.py).
#
# Staged here by scripts/stage_vllm_gpu.sh (DEST .device/i33/vg or any other); then on the device, back to back:
#   mkdir -p /tmp/vparts && mv DEST/p1/* /tmp/vparts/                                  # carry DEST/p1
#   mkdir -p /tmp/vparts && mv DEST/p2/* /tmp/vparts/                                  # carry DEST/p2
#   FRANK_DEVICE_DIR=$PWD/DEST/base bash scripts/device_region_cache_gpu.sh           # carry DEST/base
#   FRANK_DEVICE_DIR=$PWD/DEST/base bash scripts/device_region_cache_gpu.sh           # resumes; again until done
#
# Everything lives in $W (/tmp/frank-rc-gpu), which a warm machine keeps between calls. Each call brings
# back $OUT/rc-gpu-N.tar.gz (the run folder, logs, shots) and $OUT/run-N.log.
#   FRANK_RC_BUDGET_S   this call's own deadline in seconds (default 560: under the 600 s a call may last)
#   FRANK_RC_CELL_S     the longest a cell is expected to take (default 110): no cell starts later than
#                       BUDGET - CELL - 20 s into the call
#   FRANK_RC_FLOOR=0    leave out the floor runs after the report (two engine starts more)
# A dry run here (mechanics only, on the CPU engine; FRANK_RC_INSTALL=0 skips the vLLM install):
#   FRANK_RC_INSTALL=0 FRANK_RC_DESIGN=/tmp/small-design.toml FRANK_RC_PROFILE=embedded-cpu FRANK_RC_PYTHON=$PWD/.venv/bin/python \
#   FRANK_ENGINE_PYTHON=$PWD/.venv-engine/bin/python FRANK_MODELS=$PWD/.build/models FRANK_RC_BUDGET_S=200 \
#   FRANK_RC_CELL_S=150 bash scripts/device_region_cache_gpu.sh      (twice: the second call resumes)
set -uo pipefail

TREE=$(cd "$(dirname "$0")/.." && pwd)
D=${FRANK_DEVICE_DIR:-$PWD/.device/i33/vg/base}
PARTS=${FRANK_VLLM_PARTS:-/tmp/vparts}
DESIGN=${FRANK_RC_DESIGN:-$TREE/frank/experiments/designs/region-cache-gpu.toml}
PROFILE=${FRANK_RC_PROFILE:-embedded-gpu}
PY=${FRANK_RC_PYTHON:-python3}
BUDGET_S=${FRANK_RC_BUDGET_S:-560}
CELL_S=${FRANK_RC_CELL_S:-110}
OUT=${OUT:-/tmp/frank-rc-gpu-out}
W=${FRANK_RC_WORK:-/tmp/frank-rc-gpu}
mkdir -p "$W/models" "$OUT"
N=$(( $(cat "$W/calls" 2>/dev/null || echo 0) + 1 )); echo "$N" >"$W/calls"
LOG=$W/logs-$N
mkdir -p "$LOG"
cd "$W" || exit 1   # not the checkout's root: `python3 -m frank...` would import whatever frank is there first
export FRANK_HOME=$W/home FRANK_MODELS=${FRANK_MODELS:-$W/models} PYTHONUNBUFFERED=1 PYTHONPATH=$TREE:$W/site
export FRANK_ENGINE_PYTHON=${FRANK_ENGINE_PYTHON:-$(command -v python3)}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
frank() { "$PY" -m frank.console.cli "$@"; }
stamp() { echo "== $(date -u +%H:%M:%S) [$SECONDS s] $*"; }
RUN=$(cat "$W/run-id" 2>/dev/null || true)
finish() {
    stamp "pack"
    [ -n "$RUN" ] && frank experiment status "$RUN" --json >"$LOG/status.json" 2>&1
    local folder=$FRANK_HOME/data/runs/experiments/$RUN
    tar -czf "$OUT/rc-gpu-$N.tar.gz" -C "$W" "logs-$N" $([ -n "$RUN" ] && [ -d "$folder" ] && echo "home/data/runs/experiments/$RUN") \
        $(cd "$W" && ls -d home/state/logs 2>/dev/null)
    cp "$LOG/run.log" "$OUT/run-$N.log"
}
trap finish EXIT
trap "exit 143" TERM INT
exec > >(tee "$LOG/run.log") 2>&1

stamp "call $N"
[ "${FRANK_RC_INSTALL:-1}" = 0 ] || . "$TREE/scripts/device_vllm_install.sh"
frank workload check w01-full   # generated on first use (deterministic): a few seconds

if [ -z "$RUN" ]; then
    stamp "register $DESIGN"
    frank experiment register "$DESIGN" --json >"$LOG/register.json" || exit 1
    RUN=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$LOG/register.json")
    echo "$RUN" >"$W/run-id"
    "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["run_id"], r["design_sha256"][:16], [o["arm"] for o in r["order"]])' "$LOG/register.json"
fi

state() { "$PY" -c 'import json,sys; print(json.load(sys.stdin)["status"])' < <(frank experiment status "$RUN" --json); }
if [ "$(state)" != finished ]; then
    STOP_AFTER=$(( BUDGET_S - CELL_S - 20 - SECONDS ))
    [ "$STOP_AFTER" -gt 0 ] || { stamp "no time left for a cell"; exit 0; }
    stamp "run $RUN (detached; no cell starts after $STOP_AFTER s)"
    frank experiment run "$RUN" --detach --stop-after "$STOP_AFTER" --json | tee "$LOG/run-detach.json"
    if [ "$N" -le 4 ] && [ ! -f "$W/shots/dashboard.svg" ]; then
        stamp "the console mid-run (after the first cell)"
        timeout 200 "$PY" "$TREE/scripts/console_shots.py" --out-dir "$W/shots" --run "$RUN" --samples "${FRANK_RC_SHOT_SAMPLES:-8}" --cells 1 \
            --keys 20 --timeout 150 >"$LOG/console-shots.json" 2>"$LOG/console-shots.err"
        echo "console shots exit $?"; tail -3 "$LOG/console-shots.err"; cat "$LOG/console-shots.json"
        cp -r "$W/shots" "$LOG/shots" 2>/dev/null
    fi
    # SIGINT back to its default (a background job of a script ignores it): telemetry ends its JSON on it
    "$PY" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
        "$PY" -m frank.console.cli telemetry --period 1 --json >"$LOG/telemetry.json" 2>/dev/null &
    TEL=$!
    while "$PY" -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["state"] == "running" else 1)' \
            < <(frank jobs status "$RUN" --json 2>/dev/null); do
        if [ "$SECONDS" -ge $(( BUDGET_S - 15 )) ]; then
            stamp "the call's deadline: cancel the runner (the cell in flight is redone on resume)"
            frank jobs cancel "$RUN" >/dev/null 2>&1; sleep 10
            break
        fi
        sleep 5
    done
    kill -INT "$TEL" 2>/dev/null; wait "$TEL" 2>/dev/null
    grep -h '"event"' "$FRANK_HOME/data/runs/experiments/$RUN/job.log" | tail -n 40 | cut -c1-300
fi
frank experiment status "$RUN" | tee "$LOG/status.txt"
[ "$(state)" = finished ] || { stamp "not finished: call again to resume"; exit 0; }

stamp "report"
frank experiment report "$RUN" --json >"$LOG/report.json"
frank experiment report "$RUN" | tee "$LOG/report.txt"
frank experiment report "$RUN" --html "$LOG/report.html"
frank experiment report "$RUN" --csv "$LOG/region-cache-gpu-h200.csv"
frank bench part --list --json >"$LOG/bench-part-list.json" 2>&1
"$PY" -c 'import json,sys; print([(p["name"], p.get("verified_vllm"), p.get("compatible")) for p in json.load(open(sys.argv[1]))])' "$LOG/bench-part-list.json"
for arm in empty on; do
    if [ "${FRANK_RC_FLOOR:-1}" = 1 ] && [ ! -f "$W/floor-$arm.json" ] && [ "$SECONDS" -lt $(( BUDGET_S - CELL_S - 30 )) ]; then
        stamp "per request against the empty-region floor: --arm $arm"
        WITH=(); [ "$arm" = on ] && WITH=(--with detok_tail=on)
        "$PY" "$TREE/benchmarks/profile_region_cache_engine.py" --rate 0 --profile "$PROFILE" --arm "$arm" \
            "${WITH[@]}" --json >"$W/floor-$arm.json" 2>"$LOG/floor-$arm.err" || { tail -5 "$LOG/floor-$arm.err"; rm -f "$W/floor-$arm.json"; }
        cp "$W/floor-$arm.json" "$LOG/" 2>/dev/null
    fi
done
stamp "done"
