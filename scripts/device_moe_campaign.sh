#!/usr/bin/env bash
# The campaign's method on the CPU-expert MoE, ON the GPU machine (issues 32 and 38; docs/gpu-run.md, "The
# campaign's method on the GPU"): llama.cpp's CUDA llama-server (carried from an earlier call, or built there
# from the carried source) serving frank-moe-gpu (drawn and converted there) through `llamacpp-gpu-moe`,
# then only frank's own commands:
#
#   1. the A/A run: frank/experiments/designs/cpu-experts-aa.toml registered and run (3 blocks of two starts
#      of one schedule);
#   2. `frank experiment plan cpu-experts-sched.toml --noise AA_RUN --effect-pct $EFFECT`: the blocks the
#      schedule test gets are the plan's for 80% power, at least the seed's 5 and at most FRANK_SCHED_MAX_BLOCKS,
#      written into the design before it is registered (the registered design comes back in $OUT);
#   3. the schedule test registered and run detached, stopping when decided; the console's dashboard and
#      experiments screen saved mid-run with the keypress-to-paint figure (scripts/console_shots.py),
#      telemetry recorded beside; once finished: the report (JSON, text, HTML with plots) and its CSV;
#   4. the screen of the CPU pool (frank/experiments/screens/cpu-pool.toml: six settings against the default,
#      three repeats) registered and run, the console shot mid-screen, its record, report and pick;
#   5. the pick's confirmation design (`frank experiment screen --report RUN --design-out`) registered and
#      run, stopping when decided; its report and CSV.
#
# A call there lasts at most 10 minutes: every phase resumes in the next call from what $W holds (a warm
# machine keeps /tmp), the runs through their journals (`frank experiment run --detach --stop-after S`:
# the runner stops between cells). Call it again until it prints "all done".
#
#   here:   [BIN_PARTS=/path/to/llama-bin-parts] scripts/stage_cpu_experts_device.sh .device/i38
#   there:  FRANK_DEVICE_DIR=$PWD/.device/i38 bash scripts/device_moe_campaign.sh     (carry .device/i38)
#   (with no BIN_PARTS the first call builds llama-server there: copy the llama-bin.part-* it sends back into
#   .device/i38 before the next call, in case the machine is not warm any more)
#
# A dry run here (mechanics only: the CPU wheel's llama-server, tiny-frank-moe, no GPU readings):
#   FRANK_SCHED_PROFILE=llamacpp-cpu-moe FRANK_SCHED_MODEL=tiny-frank-moe FRANK_SCHED_PYTHON=$PWD/.venv/bin/python \
#   FRANK_SCHED_MODEL_PYTHON=$PWD/.venv-engine/bin/python FRANK_MODELS=$PWD/.build/models FRANK_SCHED_SHOT_SAMPLES=0 \
#   FRANK_LLAMA_SERVER=none FRANK_SCHED_KNOBS="cpu_moe_layers = 2, cpu_threads = 2" FRANK_SCHED_REQUESTS=2 \
#   FRANK_SCHED_AA_BLOCKS=2 FRANK_SCHED_MIN_BLOCKS=2 FRANK_SCHED_MAX_BLOCKS=2 FRANK_SCREEN=cpu-pool-local \
#   bash scripts/device_moe_campaign.sh
set -uo pipefail

TREE=$(cd "$(dirname "$0")/.." && pwd)
D=${FRANK_DEVICE_DIR:-$PWD/.device/i38}
OUT=${OUT:-/tmp/frank-sched-out}
W=${FRANK_SCHED_WORK:-/tmp/frank-sched}
PROFILE=${FRANK_SCHED_PROFILE:-llamacpp-gpu-moe}
MODEL=${FRANK_SCHED_MODEL:-frank-moe-gpu}
EFFECT=${FRANK_SCHED_EFFECT_PCT:-5}        # the effect to plan for: issue 31's table saw 6% at 16 threads
MIN_BLOCKS=${FRANK_SCHED_MIN_BLOCKS:-5}   # the seed's five
MAX_BLOCKS=${FRANK_SCHED_MAX_BLOCKS:-8}
BUDGET_S=${FRANK_SCHED_BUDGET_S:-560}
CELL_S=${FRANK_SCHED_CELL_S:-45}
DESIGNS=$TREE/frank/experiments/designs
SCREEN=${FRANK_SCREEN:-cpu-pool}          # frank/experiments/screens/$SCREEN.toml
mkdir -p "$W/models" "$W/designs" "$OUT"
N=$(( $(cat "$W/calls" 2>/dev/null || echo 0) + 1 )); echo "$N" >"$W/calls"
LOG=$W/logs-$N
mkdir -p "$LOG"
cd "$W" || exit 1   # not the checkout's root: `python3 -m frank...` would import whatever frank is there first
export FRANK_HOME=$W/home FRANK_MODELS=${FRANK_MODELS:-$W/models} PYTHONUNBUFFERED=1 PYTHONPATH=$TREE:$W/site
export FRANK_LLAMACPP_SRC=$W/llama.cpp NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=$(command -v "${FRANK_SCHED_PYTHON:-python3}")
MODEL_PY=$(command -v "${FRANK_SCHED_MODEL_PYTHON:-$PY}")
frank() { "$PY" -m frank.console.cli "$@"; }
stamp() { echo "== $(date -u +%H:%M:%S) [$SECONDS s] $*"; }
runs_dir=$FRANK_HOME/data/runs/experiments
finish() {
    stamp "pack"
    frank engine stop --json >/dev/null 2>&1
    local keep=("logs-$N" designs)
    [ -d "$runs_dir" ] && keep+=(home/data/runs/experiments)
    [ -d home/state/logs ] && keep+=(home/state/logs)
    tar -czf "$OUT/sched-$N.tar.gz" --exclude='*.npz' --exclude='*.part-*' -C "$W" "${keep[@]}" $(ls -d shots shots-screen 2>/dev/null)
    cp "$LOG/run.log" "$OUT/run-$N.log"
}
trap finish EXIT
trap "exit 143" TERM INT
exec > >(tee "$LOG/run.log") 2>&1
left() { echo $(( BUDGET_S - SECONDS )); }

stamp "call $N"
if ! "$PY" -c 'import textual, psutil, httpx, pynvml' 2>/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$W/site" "$D"/wheels/*.whl || exit 1
fi
if [ ! -f "$W/llama.cpp/conversion/deepseek.py" ]; then
    mkdir -p "$W/llama.cpp" && tar -xzf "$D/llama.cpp-convert.tar.gz" -C "$W/llama.cpp" || exit 1
fi
# llama-server: given (a dry run sets none: the CPU profile needs no binary), built by an earlier call on this
# machine, carried as parts, or built now from the carried source beside the model (about 300 s on 16 cores;
# its bin/ comes back in $OUT as llama-bin.part-*, to carry next time)
BUILD_PID=
if [ -z "${FRANK_LLAMA_SERVER:-}" ]; then
    if [ ! -x "$W/build/bin/llama-server" ] && compgen -G "$D/llama-bin.part-*" >/dev/null; then
        mkdir -p "$W/build" && cat "$D"/llama-bin.part-* | tar -xz -C "$W/build" || exit 1
    elif [ ! -x "$W/build/bin/llama-server" ]; then
        stamp "build llama-server (CUDA, sm_90) in the background"
        if [ ! -f "$W/llama.cpp-src/CMakeLists.txt" ]; then   # kept: a call cut off mid-build resumes it with ninja
            mkdir -p "$W/llama.cpp-src" && tar -xzf "$D/llama.cpp-src.tar.gz" -C "$W/llama.cpp-src" || exit 1
        fi
        (cmake -S "$W/llama.cpp-src" -B "$W/build" -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
            -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF &&
            ninja -C "$W/build" -j"$(nproc)" llama-server) >"$LOG/build.log" 2>&1 &
        BUILD_PID=$!
    fi
    export FRANK_LLAMA_SERVER=$W/build/bin/llama-server
fi
if ! frank model verify --model "$MODEL" --json >/dev/null 2>&1; then
    stamp "build $MODEL"
    KIT=(); [ -f "$D/kit-$MODEL/shapes.json" ] && KIT=(--kit "$D/kit-$MODEL")
    ( time "$MODEL_PY" -m frank.engine.models.moe_model build --model "$MODEL" --out "$FRANK_MODELS/$MODEL" "${KIT[@]}" ) \
        >"$LOG/model-build.json" 2>"$LOG/model-build.err" || { tail -30 "$LOG/model-build.err"; exit 1; }
    tail -4 "$LOG/model-build.err"
fi
frank model verify --model "$MODEL" --json >"$LOG/model-verify.json" && head -c 400 "$LOG/model-verify.json"; echo
if [ -n "$BUILD_PID" ]; then
    wait "$BUILD_PID" || { tail -40 "$LOG/build.log"; rm -rf "$W/build"; exit 1; }
    stamp "built llama-server"
    tar -czf - -C "$W/build" bin | split -b 15000000 - "$OUT/llama-bin.part-" && ls -la "$OUT"/llama-bin.part-*
fi
frank engine start --profile "$PROFILE" --dry-run >"$LOG/engine-dry-run.txt" 2>&1

# the designs as this machine runs them: the profile and model (a dry run elsewhere names others), knobs
localize() {  # SRC DEST [BLOCKS]: on the GPU machine the designs as shipped, with the plan's blocks
    sed -e "s/^profile = \"llamacpp-gpu-moe\"/profile = \"$PROFILE\"/" "$1" >"$2"
    if [ -n "${FRANK_SCHED_KNOBS:-}" ]; then sed -i "s/cpu_moe_layers = 4, cpu_threads = 16/${FRANK_SCHED_KNOBS}/" "$2"; fi
    if [ -n "${FRANK_SCHED_REQUESTS:-}" ]; then sed -i "s/^requests = [0-9]*/requests = $FRANK_SCHED_REQUESTS/" "$2"; fi
    if [ -n "${3:-}" ]; then sed -i "s/^blocks = [0-9]*/blocks = $3/" "$2"; fi
}
. "$TREE/scripts/device_runs.sh"  # status_of, follow_run, register
run_until() {  # RUN: run or resume it detached until it stops (finished, or the time limit); 0 if finished
    local run=$1 stop_after
    [ "$(status_of "$run")" = finished ] && return 0
    stop_after=$(( $(left) - CELL_S - 20 ))
    [ "$stop_after" -gt 0 ] || return 1
    stamp "run $run (detached; no cell starts after $stop_after s)"
    frank experiment run "$run" --detach --stop-after "$stop_after" --json >"$LOG/detach-$run.json" || return 1
    [ -n "${2:-}" ] && "$2" "$run"
    follow_run "$run"
}
shots() {  # RUN [DIR]: the console mid-run, once per DIR; telemetry beside the run until it stops
    local dir=${2:-shots}
    if [ ! -f "$W/$dir/dashboard.svg" ]; then
        stamp "the console mid-run ($dir)"
        timeout 240 "$PY" "$TREE/scripts/console_shots.py" --out-dir "$W/$dir" --run "$1" \
            --samples "${FRANK_SCHED_SHOT_SAMPLES:-8}" --cells 2 --keys 20 --timeout 180 \
            >"$LOG/console-$dir.json" 2>"$LOG/console-$dir.err"
        echo "console shots exit $?"; tail -3 "$LOG/console-$dir.err"; cat "$LOG/console-$dir.json"
    fi
    # SIGINT back to its default (a background job of a script ignores it): telemetry ends its JSON on it
    "$PY" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
        "$PY" -m frank.console.cli telemetry --period 1 --json >"$LOG/telemetry-$1.json" 2>/dev/null &
    echo $! >"$W/telemetry.pid"
}

stamp "the A/A run"
localize "$DESIGNS/cpu-experts-aa.toml" "$W/designs/cpu-experts-aa.toml" "${FRANK_SCHED_AA_BLOCKS:-}"
AA=$(register "$W/designs/cpu-experts-aa.toml")
run_until "$AA" || { stamp "the A/A run is not finished: call again"; exit 0; }
frank experiment report "$AA" --json >"$LOG/report-aa.json"
frank experiment report "$AA" | tee "$LOG/report-aa.txt"

SCHED=$W/designs/cpu-experts-sched.toml
if [ ! -f "$W/run-cpu-experts-sched" ]; then
    stamp "plan the schedule test from the A/A spread ($EFFECT% effect)"
    localize "$DESIGNS/cpu-experts-sched.toml" "$SCHED"
    frank experiment plan "$SCHED" --noise "$AA" --effect-pct "$EFFECT" --json >"$LOG/plan.json" || exit 1
    frank experiment plan "$SCHED" --noise "$AA" --effect-pct "$EFFECT" | tee "$LOG/plan.txt"
    BLOCKS=$("$PY" -c 'import json,sys; p=json.load(open(sys.argv[1])); n=p["blocks_for_80"] or int(sys.argv[2])
print(max(int(sys.argv[3]), min(int(sys.argv[2]), n)))' "$LOG/plan.json" "$MAX_BLOCKS" "$MIN_BLOCKS")
    localize "$DESIGNS/cpu-experts-sched.toml" "$SCHED" "$BLOCKS"
    stamp "blocks: $BLOCKS"
    frank experiment plan "$SCHED" --noise "$AA" --effect-pct "$EFFECT" --json >"$LOG/plan-registered.json"
fi
RUN=$(register "$SCHED")
if [ -f "$W/telemetry.pid" ]; then kill -INT "$(cat "$W/telemetry.pid")" 2>/dev/null; rm -f "$W/telemetry.pid"; fi
run_until "$RUN" shots; done_rc=$?
if [ -f "$W/telemetry.pid" ]; then kill -INT "$(cat "$W/telemetry.pid")" 2>/dev/null; rm -f "$W/telemetry.pid"; fi
[ $done_rc = 0 ] || { stamp "the schedule test is not finished: call again"; exit 0; }

if [ ! -f "$W/designs/cpu-experts-sched-h200.csv" ]; then
    stamp "report"
    frank experiment report "$RUN" --json >"$LOG/report.json"
    frank experiment report "$RUN" | tee "$LOG/report.txt"
    frank experiment report "$RUN" --html "$LOG/report.html"
    frank experiment report "$RUN" --csv "$LOG/cpu-experts-sched-h200.csv"
    cp "$LOG/report.html" "$LOG/cpu-experts-sched-h200.csv" "$W/designs/"
fi

# -- the screen of the CPU pool, then its pick confirmed against the default --------------------------
SCREEN_FILE=$W/designs/$SCREEN.toml
[ -f "$SCREEN_FILE" ] || cp "$TREE/frank/experiments/screens/$SCREEN.toml" "$SCREEN_FILE"
if [ ! -f "$W/run-screen" ]; then
    frank experiment screen "$SCREEN_FILE" --register-only --json >"$LOG/register-screen.json" || exit 1
    "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$LOG/register-screen.json" >"$W/run-screen"
fi
SRUN=$(cat "$W/run-screen")
screen_shots() { shots "$1" shots-screen; }
run_until "$SRUN" screen_shots; done_rc=$?
if [ -f "$W/telemetry.pid" ]; then kill -INT "$(cat "$W/telemetry.pid")" 2>/dev/null; rm -f "$W/telemetry.pid"; fi
[ $done_rc = 0 ] || { stamp "the screen is not finished: call again"; exit 0; }
CONFIRM=$W/designs/$SCREEN-confirm.toml
if [ ! -f "$W/designs/$SCREEN-h200.json" ]; then
    stamp "the screen's report and pick"
    frank experiment screen --report "$SRUN" --export "$LOG/$SCREEN-h200.json" --html "$LOG/$SCREEN-h200.html" \
        | tee "$LOG/screen.txt"
    cp "$LOG/$SCREEN-h200.json" "$LOG/$SCREEN-h200.html" "$W/designs/"
    frank experiment screen --report "$SRUN" --design-out "$CONFIRM" >/dev/null || rm -f "$CONFIRM"
fi
if [ ! -f "$CONFIRM" ]; then stamp "no pick: nothing to confirm"; stamp "all done"; exit 0; fi
CRUN=$(register "$CONFIRM")
run_until "$CRUN" || { stamp "the confirmation is not finished: call again"; exit 0; }
if [ ! -f "$W/designs/$SCREEN-confirm-h200.csv" ]; then
    stamp "the confirmation's report"
    frank experiment report "$CRUN" --json >"$LOG/report-confirm.json"
    frank experiment report "$CRUN" | tee "$LOG/report-confirm.txt"
    frank experiment report "$CRUN" --html "$LOG/$SCREEN-confirm-h200.html"
    frank experiment report "$CRUN" --csv "$LOG/$SCREEN-confirm-h200.csv"
    cp "$LOG/$SCREEN-confirm-h200.html" "$LOG/$SCREEN-confirm-h200.csv" "$W/designs/"
fi
stamp "all done"
