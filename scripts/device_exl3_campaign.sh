#!/usr/bin/env bash
# The campaign's method on exllamav3's CPU experts, ON the GPU machine (issue 50; docs/gpu-run.md, "exllamav3's
# pool: screen, confirm, schedule"): exllamav3 1.6.5 serving frank-moe-exl3 through `exl3-gpu-moe`, a third of
# every layer's routed experts on its CPU worker, then only frank's own commands, the GPU's time spent on the
# screen and the confirmation first:
#
#   0. setup: scripts/device_exl3.sh itself with FRANK_EXL3_SETUP_ONLY=1 (the carried wheels, exllamav3's
#      extension carried or compiled by the system compiler and checked, frank-moe-exl3 drawn and converted to
#      EXL3 3.0 bpw), called again each call until it stamps `setup`; its environment ($W/exl3-env.sh) sourced;
#   1. the screen of the pool (frank/experiments/screens/exl3-pool.toml: threads, slots, the pinning and the
#      placement against the default, 3 repeats, the pick rule in the file), at the fitted split when
#      FRANK_EXL3_SPLIT gives one (`frank engine fit`'s answer on the card is kept beside it, designs/fit.json:
#      frank-moe-exl3 is 550 MB, so with the whole card free the fit may put no expert on the CPU and leave no
#      pool to screen); its record, report and pick (exl3-pool-h200.json, .html);
#   2. the pick's confirmation design (`frank experiment screen --report RUN --design-out`) registered and run
#      in blocks that stop when decided; its report and CSV (exl3-pool-confirm-h200.csv);
#   3. the seed's schedule test (frank/experiments/designs/exl3-cpu-experts-sched.toml), its blocks planned on the
#      screen's spread (`frank experiment plan --spread-pct`, at least the seed's 5, at most
#      FRANK_EXL3_SCHED_MAX_BLOCKS), stopping when decided; its report and CSV (exl3-cpu-experts-sched-h200.csv);
#   4. when the confirmation confirmed the pick: a campaign of that part (frank campaign adopt on the registered
#      run, then serve), exllamav3 started with the served settings, a W01 mini replay, the revert watch's check
#      of it (frank campaign watch, status).
#
# A call there lasts at most 10 minutes: every step resumes in the next call from what $W holds (a warm
# machine keeps /tmp): setup through device_exl3.sh's stamps, the runs through their journals (`frank
# experiment run --detach --stop-after S`: no cell starts after S; one cut off at the call's end is redone).
# Call it again until it prints "all done". Everything comes back in $OUT (exl3-campaign-N.tar.gz, run-N.log).
#
#   here:   EXT_PARTS=.device/exl3-ext scripts/stage_exl3_device.sh .device/i50    (the extension built here:
#           `make exl3-ext`; without it the first call compiles it there, 5.5 minutes)
#   there:  FRANK_DEVICE_DIR=$PWD/.device/i50/c1 bash scripts/device_exl3_campaign.sh   (first call: carry c1)
#           bash scripts/device_exl3_campaign.sh                                        (later calls)
#
# A dry run here (no CUDA: setup as device_exl3.sh's dry run, then every registration, the settings' command
# lines and the schedule test's plan, stopping where a cell would start exllamav3; the spread is a stand-in,
# the llama.cpp screen's 5.64%):
#   FRANK_EXL3_DRY_RUN=1 FRANK_EXL3_PYTHON_BASE=$PWD/.venv/bin/python FRANK_EXL3_MODEL_PYTHON=$PWD/.venv-engine/bin/python \
#   FRANK_EXL3_MODEL=tiny-frank-moe FRANK_DEVICE_DIR=$PWD/.device/i48/c1 FRANK_EXL3_WORK=/tmp/frank-exl3c-dry \
#   FRANK_EXL3_SPREAD_PCT=5.64 OUT=/tmp/frank-exl3c-dry-out bash scripts/device_exl3_campaign.sh
set -uo pipefail

TREE=$(cd "$(dirname "$0")/.." && pwd)
. "$TREE/scripts/device_runs.sh"  # status_of, follow_run, restore_work, register
OUT=${OUT:-/tmp/frank-exl3-out}
W=${FRANK_EXL3_WORK:-/tmp/frank-exl3}      # device_exl3.sh's work folder: its wheels, extension and model
BUDGET_S=${FRANK_EXL3_BUDGET_S:-560}
DRY=${FRANK_EXL3_DRY_RUN:-}
SPLIT=${FRANK_EXL3_SPLIT:-}                 # the fitted split (a value exl3-gpu-moe's cpu_split takes)
SPREAD=${FRANK_EXL3_SPREAD_PCT:-}           # the spread to plan the schedule test on (default: the screen's)
EFFECT=${FRANK_EXL3_EFFECT_PCT:-5}
MIN_BLOCKS=${FRANK_EXL3_SCHED_MIN_BLOCKS:-5}   # the seed's five
MAX_BLOCKS=${FRANK_EXL3_SCHED_MAX_BLOCKS:-8}
CELL_S=${FRANK_EXL3_CELL_S:-90}             # a cell at most: an exllamav3 start (14-24 s on the GPU alone) and 4 requests
RESUME=${FRANK_EXL3_RESUME_FROM:-}          # a previous session's exl3-campaign-N.tar.gz (its last), carried
SCREEN=exl3-pool
SCHED=exl3-cpu-experts-sched
DESIGNS=$TREE/frank/experiments/designs
SCREENS=$TREE/frank/experiments/screens
mkdir -p "$W/designs" "$W/done" "$OUT"
# A new session's fresh machine goes on with the last session's runs (their journals; the setup is done again)
if [ -n "$RESUME" ]; then restore_work "$RESUME" "$W" served-pick || exit 1; fi
N=$(( $(cat "$W/campaign-calls" 2>/dev/null || echo 0) + 1 )); echo "$N" >"$W/campaign-calls"
LOG=$W/campaign-logs-$N
mkdir -p "$LOG"
cd "$W" || exit 1   # not the checkout's root: `python3 -m frank...` would import whatever frank is there first
stamp() { echo "== $(date -u +%H:%M:%S) [$SECONDS s] $*"; }
left() { echo $(( BUDGET_S - SECONDS )); }
done_() { [ -f "$W/done/$1" ]; }
mark() { date -u +%FT%TZ >"$W/done/$1"; }
frank() { "$PY" -m frank.console.cli "$@"; }
runs_dir=$W/home/data/runs/experiments
finish() {
    stamp "pack"
    [ -n "${PY:-}" ] && frank engine stop --json >/dev/null 2>&1
    local keep=("campaign-logs-$N" designs done campaign-calls) f
    for d in home/data/runs home/state/logs; do [ -d "$W/$d" ] && keep+=("$d"); done
    for f in "$W"/run-*; do [ -f "$f" ] && keep+=("${f##*/}"); done   # the runs' ids: a later session resumes them
    tar -czf "$OUT/exl3-campaign-$N.tar.gz" --exclude='*.npz' --exclude='*.safetensors' -C "$W" "${keep[@]}"
    cp "$LOG/run.log" "$OUT/run-$N.log"
}
trap finish EXIT
trap "exit 143" TERM INT
exec > >(tee "$LOG/run.log") 2>&1

# ---------------------------------------------------------------- 0. setup: device_exl3.sh's own phases
stamp "call $N"
if ! done_ setup; then
    stamp "setup: scripts/device_exl3.sh (FRANK_EXL3_SETUP_ONLY=1, $(left) s)"
    FRANK_EXL3_SETUP_ONLY=1 FRANK_EXL3_BUDGET_S=$(( $(left) - 20 )) FRANK_EXL3_WORK=$W OUT=$OUT/setup \
        bash "$TREE/scripts/device_exl3.sh"
    done_ setup || { stamp "setup is not finished: call again"; exit 0; }
fi
# shellcheck source=/dev/null
source "$W/exl3-env.sh" || exit 1   # FRANK_HOME, FRANK_MODELS, PYTHONPATH, FRANK_EXL3_PYTHON, the compiler; PY
stamp "setup done: $MODEL, engine python $FRANK_EXL3_PYTHON"
if [ -z "$DRY" ] && [ ! -f "$W/designs/fit.json" ]; then   # the split's fit on this card, beside the screen's split
    frank engine fit --profile exl3-gpu-moe --json >"$W/designs/fit.json" 2>"$LOG/fit.err"
    stamp "the fit: $(head -c 600 "$W/designs/fit.json") $(tail -c 300 "$LOG/fit.err"); the screen runs at cpu_split ${SPLIT:-21}"
fi

run_until() {  # RUN: run or resume it detached until it stops (finished, or the call's time); 0 if finished
    local run=$1 stop_after
    [ "$(status_of "$run")" = finished ] && return 0
    if [ -n "$DRY" ]; then stamp "dry run: $run's cells start exllamav3 on a GPU: not run"; return 1; fi
    stop_after=$(( $(left) - CELL_S - 20 ))
    [ "$stop_after" -gt 0 ] || return 1
    stamp "run $run (detached; no cell starts after $stop_after s)"
    frank experiment run "$run" --detach --stop-after "$stop_after" --json >"$LOG/detach-$run.json" || return 1
    follow_run "$run"
}
report() {  # RUN NAME: the report (JSON, text, HTML) and its CSV into $W/designs/NAME-h200.*
    [ -f "$W/designs/$2-h200.csv" ] && return 0
    stamp "$2's report"
    frank experiment report "$1" --json >"$LOG/report-$2.json"
    frank experiment report "$1" | tee "$LOG/report-$2.txt"
    frank experiment report "$1" --html "$W/designs/$2-h200.html"
    frank experiment report "$1" --csv "$LOG/$2-h200.csv" && cp "$LOG/$2-h200.csv" "$W/designs/"
}

# ---------------------------------------------------------------- 1. the screen of the pool
SCREEN_FILE=$W/designs/$SCREEN.toml
if [ ! -f "$SCREEN_FILE" ]; then   # as shipped, at the fitted split when one is given
    sed -e "${SPLIT:+s/cpu_split = 21,/cpu_split = $SPLIT,/}" "$SCREENS/$SCREEN.toml" >"$SCREEN_FILE"
fi
if [ ! -f "$W/run-screen" ]; then
    stamp "register the screen ($SCREEN_FILE)"
    frank experiment screen "$SCREEN_FILE" --register-only --json >"$LOG/register-screen.json" || exit 1
    "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$LOG/register-screen.json" >"$W/run-screen"
    # every setting's command line and EXL3_* environment, as its cells will start it
    "$PY" - "$SCREEN_FILE" >"$LOG/settings.txt" <<'PYEOF'
import sys
from frank.experiments.screen import load_screen
for arm in load_screen(sys.argv[1]).settings:
    print(arm.name, " ".join(f"--knob {k}={v}" for k, v in sorted(arm.knob_dict.items())))
PYEOF
    while read -r name knobs; do
        # shellcheck disable=SC2086 (the knobs are words)
        echo "$name: $(frank engine start --profile exl3-gpu-moe --dry-run --json $knobs | "$PY" -c \
            'import json,sys; d=json.load(sys.stdin); print(" ".join(f"{k}={v}" for k, v in sorted(d["env"].items()) if k.startswith("EXL3_")))')"
    done <"$LOG/settings.txt" | tee "$LOG/settings-env.txt"
fi
SRUN=$(cat "$W/run-screen")
if ! run_until "$SRUN" && [ -z "$DRY" ]; then stamp "the screen is not finished: call again"; exit 0; fi
CONFIRM=$W/designs/$SCREEN-confirm.toml
if [ -z "$DRY" ] && [ ! -f "$W/designs/$SCREEN-h200.json" ]; then
    stamp "the screen's report and pick"
    frank experiment screen --report "$SRUN" --export "$LOG/$SCREEN-h200.json" --html "$W/designs/$SCREEN-h200.html" \
        | tee "$LOG/screen.txt"
    cp "$LOG/$SCREEN-h200.json" "$W/designs/"
    frank experiment screen --report "$SRUN" --design-out "$CONFIRM" >/dev/null || rm -f "$CONFIRM"
fi

# ---------------------------------------------------------------- 2. the pick's confirmation
if [ -f "$CONFIRM" ]; then
    CRUN=$(register "$CONFIRM")
    run_until "$CRUN" || { stamp "the confirmation is not finished: call again"; exit 0; }
    report "$CRUN" "$SCREEN-confirm"
elif [ -z "$DRY" ]; then
    stamp "the screen picked nothing: the default stays, nothing to confirm"
fi

# ---------------------------------------------------------------- 3. the seed's schedule test
SCHED_FILE=$W/designs/$SCHED.toml
if [ ! -f "$W/run-$SCHED" ]; then
    [ -n "$SPREAD" ] || SPREAD=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["result"]["spread_pct"] or "")' \
        "$W/designs/$SCREEN-h200.json")
    sed -e "${SPLIT:+s/cpu_split = 21,/cpu_split = $SPLIT,/}" "$DESIGNS/$SCHED.toml" >"$SCHED_FILE"
    if [ -n "$SPREAD" ]; then
        stamp "plan the schedule test on the screen's spread ($SPREAD%, a $EFFECT% effect)"
        frank experiment plan "$SCHED_FILE" --spread-pct "$SPREAD" --effect-pct "$EFFECT" --json >"$LOG/plan.json" || exit 1
        BLOCKS=$("$PY" -c 'import json,sys; p=json.load(open(sys.argv[1])); n=p["blocks_for_80"] or int(sys.argv[2])
print(max(int(sys.argv[3]), min(int(sys.argv[2]), n)))' "$LOG/plan.json" "$MAX_BLOCKS" "$MIN_BLOCKS")
        sed -i "s/^blocks = [0-9]*/blocks = $BLOCKS/" "$SCHED_FILE"
        frank experiment plan "$SCHED_FILE" --spread-pct "$SPREAD" --effect-pct "$EFFECT" | tee "$LOG/plan.txt"
        stamp "blocks: $BLOCKS"
    fi
fi
SRUN2=$(register "$SCHED_FILE")
[ -z "$DRY" ] || { run_until "$SRUN2"; stamp "dry run: done up to the first cell"; exit 0; }
run_until "$SRUN2" || { stamp "the schedule test is not finished: call again"; exit 0; }
report "$SRUN2" "$SCHED"

# ---------------------------------------------------------------- 4. the confirmed pick adopted, served, watched
if [ -f "$CONFIRM" ] && ! done_ served-pick; then
    CAMPAIGN=$W/designs/campaign.toml   # beside the confirmation design it names
    if [ ! -f "$CAMPAIGN" ]; then
        "$PY" - "$CONFIRM" "$CAMPAIGN" "$SPLIT" <<'PYEOF' || exit 1
import json, sys, tomllib
from pathlib import Path
design = tomllib.loads(Path(sys.argv[1]).read_text())
arms = {a["name"]: a.get("knobs", {}) for a in design["arms"]}
pick, control = design["rule"]["treatment"], design["rule"]["control"]
knobs = {k: v for k, v in arms[pick].items() if arms[control].get(k) != v}
if sys.argv[3]:  # the fitted split the screen and its confirmation ran at is served with the pick
    knobs["cpu_split"] = arms[pick]["cpu_split"]
inline = ", ".join(f"{k} = {json.dumps(v)}" for k, v in sorted(knobs.items()))
Path(sys.argv[2]).write_text(f'''version = 1
name = "exl3-pool-served"
description = "the pool screen's pick, confirmed on this machine: adopted on its registered run, served, watched"

[[parts]]
name = "exl3-pool-pick"
title = "{pick}: the pick of exllamav3's pool screen, against the default"
profile = "exl3-gpu-moe"
knobs = {{ {inline} }}
state = "candidate"
design = "{Path(sys.argv[1]).name}"

[[parts.revert_rules]]
name = "only-the-pick-fails"
kind = "treatment_only_failures"

[[parts.revert_rules]]
name = "slower-verify-steps"
kind = "measure_worse"
measure = "time_per_verify_step"
max_worse_pct = 0.0
''')
PYEOF
        frank campaign init --file "$CAMPAIGN" --json >"$LOG/campaign-init.json" || exit 1
    fi
    if frank campaign adopt exl3-pool-pick --file "$CAMPAIGN" --json >"$LOG/campaign-adopt.json" 2>"$LOG/campaign-adopt.err"; then
        stamp "the pick adopted on its confirmed run: serve it, start exllamav3 with it, replay, the watch"
        frank campaign serve exl3-pool-pick --file "$CAMPAIGN" | tee "$LOG/campaign-serve.txt"
        frank engine start --profile exl3-gpu-moe --dry-run | tee "$LOG/served-dry-run.txt"
        frank engine start --profile exl3-gpu-moe --json >"$LOG/served-start.json" || { frank engine logs -n 80; exit 1; }
        frank replay w01-mini --draws draw-1 --limit 5 --mode full --max-tokens 64 --json >"$LOG/served-replay.json"
        frank campaign watch --file "$CAMPAIGN" | tee "$LOG/campaign-watch.txt"
        frank campaign status --file "$CAMPAIGN" | tee "$LOG/campaign-status.txt"
        frank engine stop --json >/dev/null
        mark served-pick
    else
        stamp "the pick is not adopted: $(tail -c 400 "$LOG/campaign-adopt.err")"
        mark served-pick
    fi
fi
stamp "all done"
