#!/usr/bin/env bash
# The noise study ON the GPU machine (issue 49; docs/experiments.md, "The noise study"): where the A/A spread of
# time per verify step on the CPU-expert MoE comes from, what cuts it, and the A/A run with what cut it.
# llama.cpp's CUDA llama-server (carried, or built there from the carried source) serving frank-moe-gpu
# (drawn and converted there) through `llamacpp-gpu-moe`, then only frank's own commands:
#
#   1. before: frank/experiments/designs/noise-moe.toml as shipped (today's defaults: 1 warm-up request, 9
#      measured, the mean), `frank experiment noise DESIGN --register-only`, run detached until finished; its
#      job writes noise.txt / noise.json / noise.html (the three levels' shares, the spread by requests a
#      cell and first requests dropped, mean and median, the rig beside each start), and
#      `frank experiment plan cpu-experts-sched.toml --noise RUN --effect-pct $EFFECT`;
#   2. each variant of FRANK_NOISE_VARIANTS (space-separated; changes joined with +), the same study with
#      that changed, to measure a candidate source rather than assume it:
#        threads-N    cpu_threads = N (the pool leaves cores to the host, the client and the sampler)
#        layers-N     cpu_moe_layers = N
#        warmup-N     warmup_requests = N          requests-N   requests = N
#        median       [measure] aggregate = "median" (the median of the start's steps)
#        blocks-N     blocks = N                   no-rig       FRANK_RIG_PERIOD_S=0 (no rig sampler)
#   3. after (FRANK_NOISE_AFTER, a variant spec such as "threads-12+warmup-2"; unset: no after run): the study
#      with what helped, and the plan for $EFFECT% from it. Both plans, the shares and the spreads go into
#      docs/experiments.md ("The noise study", from the GPU machine) with these commands.
#
# Leave the GPU's own settings (clocks, power limit) as they are: the rig's facts and conditions are recorded
# with every cell (frank.telemetry.rig), not changed.
#
# A call there lasts at most 10 minutes: every phase resumes in the next call from what $W holds (a warm
# machine keeps /tmp), each study through its journal (`frank experiment run --detach --stop-after S`: the
# runner stops between cells). Call it again until it prints "all done".
#
#   here:   [BIN_PARTS=/path/to/llama-bin-parts] scripts/stage_cpu_experts_device.sh .device/i49
#   there:  FRANK_DEVICE_DIR=$PWD/.device/i49 FRANK_NOISE_VARIANTS="threads-12 median" bash scripts/device_noise.sh
#   (with no BIN_PARTS the first call builds llama-server there: copy the llama-bin.part-* it sends back into
#   .device/i49 before the next call, in case the machine is not warm any more)
#
# exllamav3's CPU-expert MoE (exl3-gpu-moe) once it runs there: FRANK_NOISE_PROFILE=exl3-gpu-moe
# FRANK_NOISE_KNOBS="cpu_split = 8, cpu_threads = 8" on a machine scripts/device_exl3.sh set up (its extension
# and model: FRANK_LLAMA_SERVER=none FRANK_NOISE_MODEL=none skip llama.cpp's).
#
# A dry run here (mechanics only: the CPU wheel's llama-server, tiny-frank-moe, no GPU readings):
#   FRANK_NOISE_PROFILE=llamacpp-cpu-moe FRANK_NOISE_MODEL=tiny-frank-moe FRANK_NOISE_PYTHON=$PWD/.venv/bin/python \
#   FRANK_MODELS=$PWD/.build/models FRANK_LLAMA_SERVER=none FRANK_NOISE_KNOBS="cpu_moe_layers = 2, cpu_threads = 2" \
#   FRANK_NOISE_REQUESTS=3 FRANK_NOISE_BLOCKS=2 FRANK_NOISE_VARIANTS=warmup-0 FRANK_NOISE_AFTER=median \
#   bash scripts/device_noise.sh
set -uo pipefail

TREE=$(cd "$(dirname "$0")/.." && pwd)
D=${FRANK_DEVICE_DIR:-$PWD/.device/i49}
OUT=${OUT:-/tmp/frank-noise-out}
W=${FRANK_NOISE_WORK:-/tmp/frank-noise}
PROFILE=${FRANK_NOISE_PROFILE:-llamacpp-gpu-moe}
MODEL=${FRANK_NOISE_MODEL:-frank-moe-gpu}
EFFECT=${FRANK_NOISE_EFFECT_PCT:-3}       # issue 49: a 3% part confirmed in 10 blocks or fewer
BUDGET_S=${FRANK_NOISE_BUDGET_S:-560}
CELL_S=${FRANK_NOISE_CELL_S:-80}          # the longest cell: a start and ten 12K-19K-token requests
DESIGNS=$TREE/frank/experiments/designs
VARIANTS=${FRANK_NOISE_VARIANTS:-}
AFTER=${FRANK_NOISE_AFTER:-}
mkdir -p "$W/models" "$W/designs" "$OUT"
N=$(( $(cat "$W/calls" 2>/dev/null || echo 0) + 1 )); echo "$N" >"$W/calls"
LOG=$W/logs-$N
mkdir -p "$LOG"
cd "$W" || exit 1   # not the checkout's root: `python3 -m frank...` would import whatever frank is there first
export FRANK_HOME=$W/home FRANK_MODELS=${FRANK_MODELS:-$W/models} PYTHONUNBUFFERED=1 PYTHONPATH=$TREE:$W/site
export FRANK_LLAMACPP_SRC=$W/llama.cpp NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=$(command -v "${FRANK_NOISE_PYTHON:-python3}")
MODEL_PY=$(command -v "${FRANK_NOISE_MODEL_PYTHON:-$PY}")
frank() { "$PY" -m frank.console.cli "$@"; }
stamp() { echo "== $(date -u +%H:%M:%S) [$SECONDS s] $*"; }
runs_dir=$FRANK_HOME/data/runs/experiments
finish() {
    stamp "pack"
    frank engine stop --json >/dev/null 2>&1
    local keep=("logs-$N" designs)
    [ -d "$runs_dir" ] && keep+=(home/data/runs/experiments)
    [ -d home/state/logs ] && keep+=(home/state/logs)
    tar -czf "$OUT/noise-$N.tar.gz" --exclude='*.npz' --exclude='*.part-*' -C "$W" "${keep[@]}"
    cp "$LOG/run.log" "$OUT/run-$N.log"
}
trap finish EXIT
trap "exit 143" TERM INT
exec > >(tee "$LOG/run.log") 2>&1
left() { echo $(( BUDGET_S - SECONDS )); }

stamp "call $N"
if ! "$PY" -c 'import textual, psutil, httpx, pynvml, scipy, matplotlib' 2>/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$W/site" "$D"/wheels/*.whl || exit 1
fi
# llama-server: given (a dry run or an exllamav3 study sets none), built by an earlier call on this machine,
# carried as parts, or built now from the carried source beside the model (about 300 s on 16 cores; its bin/
# comes back in $OUT as llama-bin.part-*, to carry next time)
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
if [ "$MODEL" != none ] && ! frank model verify --model "$MODEL" --json >/dev/null 2>&1; then
    stamp "build $MODEL"
    if [ ! -f "$W/llama.cpp/conversion/deepseek.py" ]; then   # llama.cpp's converter, for the GGUF
        mkdir -p "$W/llama.cpp" && tar -xzf "$D/llama.cpp-convert.tar.gz" -C "$W/llama.cpp" || exit 1
    fi
    KIT=(); [ -f "$D/kit-$MODEL/shapes.json" ] && KIT=(--kit "$D/kit-$MODEL")
    ( time "$MODEL_PY" -m frank.engine.models.moe_model build --model "$MODEL" --out "$FRANK_MODELS/$MODEL" "${KIT[@]}" ) \
        >"$LOG/model-build.json" 2>"$LOG/model-build.err" || { tail -30 "$LOG/model-build.err"; exit 1; }
    tail -4 "$LOG/model-build.err"
fi
if [ -n "$BUILD_PID" ]; then
    wait "$BUILD_PID" || { tail -40 "$LOG/build.log"; rm -rf "$W/build"; exit 1; }
    stamp "built llama-server"
    tar -czf - -C "$W/build" bin | split -b 15000000 - "$OUT/llama-bin.part-" && ls -la "$OUT"/llama-bin.part-*
fi
frank engine start --profile "$PROFILE" --dry-run >"$LOG/engine-dry-run.txt" 2>&1
frank telemetry --once --json >"$LOG/telemetry-idle.json" 2>&1   # the rig's fixed facts, the engine stopped
frank telemetry --once | tee "$LOG/telemetry-idle.txt"

# the study's design as this machine runs it: the profile (a dry run names another), its knobs, its size, and
# a variant's changes (SPEC: changes joined with +, see the header)
localize() {  # SRC DEST TAG SPEC
    local src=$1 dest=$2 tag=$3 spec=$4 change n
    sed -e "s/^profile = \"llamacpp-gpu-moe\"/profile = \"$PROFILE\"/" \
        -e "s/^name = \"noise-moe\"/name = \"noise-moe-$tag\"/" "$src" >"$dest"
    if [ -n "${FRANK_NOISE_KNOBS:-}" ]; then
        sed -i "s/cpu_experts_sched = 2, cpu_moe_layers = 4, cpu_threads = 16/${FRANK_NOISE_KNOBS}/" "$dest"
    fi
    if [ -n "${FRANK_NOISE_REQUESTS:-}" ]; then sed -i "s/^requests = [0-9]*/requests = $FRANK_NOISE_REQUESTS/" "$dest"; fi
    if [ -n "${FRANK_NOISE_BLOCKS:-}" ]; then sed -i "s/^blocks = [0-9]*/blocks = $FRANK_NOISE_BLOCKS/" "$dest"; fi
    for change in ${spec//+/ }; do
        n=${change##*-}
        case $change in
            threads-*) sed -i "s/cpu_threads = [0-9]*/cpu_threads = $n/g" "$dest" ;;
            layers-*) sed -i "s/cpu_moe_layers = [0-9]*/cpu_moe_layers = $n/g" "$dest" ;;
            warmup-*) sed -i "s/^warmup_requests = [0-9]*/warmup_requests = $n/" "$dest" ;;
            requests-*) sed -i "s/^requests = [0-9]*/requests = $n/" "$dest" ;;
            blocks-*) sed -i "s/^blocks = [0-9]*/blocks = $n/" "$dest" ;;
            median) sed -i 's/^aggregate = "mean"/aggregate = "median"/' "$dest" ;;
            no-rig) ;;   # the runner's environment, below
            *) echo "unknown variant change: $change"; exit 2 ;;
        esac
    done
    grep -E '^(name|profile|knobs|blocks|requests|warmup_requests|aggregate) ' "$dest"
}
. "$TREE/scripts/device_runs.sh"  # status_of, follow_run
run_until() {  # RUN SPEC: run or resume it detached until it stops (finished, or the time limit); 0 if finished
    local run=$1 spec=$2 stop_after env=()
    [ "$(status_of "$run")" = finished ] && return 0
    stop_after=$(( $(left) - CELL_S - 20 ))
    [ "$stop_after" -gt 0 ] || return 1
    case "+$spec+" in *+no-rig+*) env=(FRANK_RIG_PERIOD_S=0) ;; esac
    stamp "run $run (detached; no cell starts after $stop_after s) ${env[*]}"
    env "${env[@]}" "$PY" -m frank.console.cli experiment run "$run" --detach --stop-after "$stop_after" --json \
        >"$LOG/detach-$run.json" || return 1
    follow_run "$run"
}
study() {  # TAG SPEC: register (once), run until finished, then its report and the plan; 0 once reported
    local tag=$1 spec=$2 design=$W/designs/noise-moe-$1.toml run
    if [ ! -f "$W/run-$tag" ]; then
        stamp "the study $tag (${spec:-as shipped})"
        localize "$DESIGNS/noise-moe.toml" "$design" "$tag" "$spec" || exit 1
        frank experiment noise "$design" --register-only --effect-pct "$EFFECT" --json >"$LOG/register-$tag.json" || exit 1
        "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$LOG/register-$tag.json" >"$W/run-$tag"
    fi
    run=$(cat "$W/run-$tag")
    run_until "$run" "$spec" || { stamp "the study $tag is not finished: call again"; return 1; }
    if [ ! -f "$W/designs/noise-$tag.txt" ]; then
        stamp "the study $tag: report and plan"
        [ -f "$runs_dir/$run/noise.json" ] || frank experiment noise --report "$run" --html "$runs_dir/$run/noise.html" >/dev/null
        frank experiment noise --report "$run" --json >"$LOG/noise-$tag.json"
        frank experiment noise --report "$run" | tee "$LOG/noise-$tag.txt"
        # the seed's rule (lower in every block) at this study's spread: what a schedule test measured the
        # same way (its requests, warm-up and aggregate) would need
        frank experiment plan "$DESIGNS/cpu-experts-sched.toml" --noise "$run" --effect-pct "$EFFECT" --json \
            >"$LOG/plan-$tag.json"
        frank experiment plan "$DESIGNS/cpu-experts-sched.toml" --noise "$run" --effect-pct "$EFFECT" \
            | tee "$LOG/plan-$tag.txt"
        cp "$runs_dir/$run/noise.html" "$W/designs/noise-$tag.html" 2>/dev/null
        cp "$LOG/noise-$tag.json" "$LOG/plan-$tag.json" "$W/designs/"
        cp "$LOG/noise-$tag.txt" "$W/designs/noise-$tag.txt"
    fi
}

study before "" || exit 0
for variant in $VARIANTS; do
    study "$variant" "$variant" || exit 0
done
if [ -n "$AFTER" ]; then
    study "after" "$AFTER" || exit 0
fi
stamp "all done"
