#!/usr/bin/env bash
# vLLM 0.26.0's CUDA build under frank, ON the GPU machine (Python 3.12, its own torch 2.11.0+cu130, no network).
# What scripts/stage_vllm_gpu.sh staged: the wheel's parts (moved by earlier calls to $FRANK_VLLM_PARTS) and
# the base folder this call carried. Joins the parts and checks their sha256, installs every wheel offline
# (--no-deps --target), makes frank's vllm.general_plugins entry points visible there, and then runs only
# frank's own commands: the plugins' verdicts on this vLLM, `frank engine start --profile embedded-gpu`,
# `frank replay w01-mini --draws draw-1` with the parts off, then with the region cache and detok-tail on
# (verify: every request compared against vLLM's own path), and the front-end part's quick check while
# time is left. Results: $OUT/vllm-gpu-run.tar.gz and $OUT/run.log.
#
#   run: mkdir -p /tmp/ft && tar -xzf .device/vllm-gpu/base/frank-tree.tar.gz -C /tmp/ft &&
#        bash /tmp/ft/scripts/device_vllm_gpu.sh
#
# FRANK_DEVICE_DIR (default $PWD/.device/vllm-gpu/base), FRANK_VLLM_PARTS (default /tmp/vparts),
# FRANK_GPU_PROFILE (default embedded-gpu), FRANK_GPU_BENCH_BY_S (skip the quick check past this many
# seconds of the script; default 300), FRANK_GPU_STOP_AT_S (the script's own deadline: default 540),
# FRANK_GPU_KNOBS (knobs for every start, "gpus=2" on the two-GPU machine: docs/gpu-run.md, "Two GPUs").
set -uo pipefail

TREE=$(cd "$(dirname "$0")/.." && pwd)
D=${FRANK_DEVICE_DIR:-$PWD/.device/vllm-gpu/base}
PARTS=${FRANK_VLLM_PARTS:-/tmp/vparts}
PROFILE=${FRANK_GPU_PROFILE:-embedded-gpu}
KNOBS=(); for k in ${FRANK_GPU_KNOBS:-}; do KNOBS+=(--knob "$k"); done
# NVLink multicast off for everything this script starts, as the two-GPU machine's notes ask (frank's own
# launches set it too: frank/engine/multi_gpu.py)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BENCH_BY_S=${FRANK_GPU_BENCH_BY_S:-300}
OUT=${OUT:-/tmp/frank-vllm-gpu-out}
W=${FRANK_GPU_WORK:-/tmp/frank-vllm-gpu}
LOG=$W/logs
rm -rf "$W" && mkdir -p "$LOG" "$OUT" "$W/models"
cd "$W" || exit 1   # not the checkout's root: `python3 -m frank...` would import the checkout's frank first
export FRANK_HOME=$W/home FRANK_MODELS=$W/models PYTHONUNBUFFERED=1 PYTHONPATH=$TREE:$W/site
export FRANK_ENGINE_PYTHON=${FRANK_ENGINE_PYTHON:-$(command -v python3)}
frank() { python3 -m frank.console.cli "$@"; }
stamp() { echo "== $(date -u +%H:%M:%S) [$SECONDS s] $*"; }
finish() {
    stamp "stop"
    frank engine stop --json >"$LOG/engine-stop.json" 2>&1
    cp -r "$FRANK_HOME/state" "$LOG/frank-state" 2>/dev/null
    tar -czf "$OUT/vllm-gpu-run.tar.gz" -C "$W" logs
    cp "$LOG/run.log" "$OUT/run.log"
}
trap finish EXIT
trap "exit 143" TERM INT
exec > >(tee "$LOG/run.log") 2>&1

. "$TREE/scripts/device_vllm_install.sh"   # join, check, install offline, entry points, models

stamp "the plugins' verdicts on this vLLM (files, then imported)"
python3 -m frank.plugins.verified >"$LOG/compat.json" 2>"$LOG/compat.err"
python3 -m frank.plugins.verified --import >"$LOG/compat-import.json" 2>>"$LOG/compat.err"
python3 -c 'import json, sys
for r in json.load(open(sys.argv[1])): print(r["part"], r["vllm"], "compatible" if r["compatible"] else "OFF", r["problems"])' "$LOG/compat-import.json"
frank bench part --list >"$LOG/bench-part-list.txt" 2>&1; cat "$LOG/bench-part-list.txt"

start() {  # start the profile with the given knobs; on failure show the log and stop the script
    frank engine start --profile "$PROFILE" "${KNOBS[@]}" "$@" --json >"$LOG/engine-start-$N.json" 2>"$LOG/engine-start-$N.err"
    local rc=$?; cat "$LOG/engine-start-$N.json"; tail -3 "$LOG/engine-start-$N.err"
    if [ $rc != 0 ]; then frank engine logs -n 80; exit 1; fi
}
N=1
stamp "engine start: $PROFILE, the parts off"
frank engine start --profile "$PROFILE" "${KNOBS[@]}" --dry-run | tee "$LOG/engine-dry-run.txt"
start
frank engine status --json >"$LOG/engine-status.json"; cat "$LOG/engine-status.json"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv | tee "$LOG/nvidia-smi-apps.csv"
frank telemetry --once --json >"$LOG/telemetry-once.json" 2>&1  # every GPU NVML sees, with its PCIe figures
python3 -c 'import json,sys; print([(g["index"], g["name"], g["util_gpu"], g["engine_memory"], g["pcie_tx_bps"], g["pcie_rx_bps"]) for g in json.load(open(sys.argv[1]))["gpus"]])' "$LOG/telemetry-once.json"
python3 "$TREE/scripts/engine_control_get.py" /frank/parts /frank/region-cache /metrics >"$LOG/control-1.json" 2>&1
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({k: (v if k != "/metrics" else [l for l in v.splitlines() if l.startswith("frank:plugin")]) for k, v in d.items()})[:3000])' "$LOG/control-1.json"

stamp "replay w01-mini draw-1, the parts off"
frank replay w01-mini --draws draw-1 --json >"$LOG/replay-off.json" 2>"$LOG/replay-off.err"
echo "replay exit $?"; tail -3 "$LOG/replay-off.err"; head -c 3000 "$LOG/replay-off.json"; echo
frank engine stop --json >"$LOG/engine-stop-1.json"

N=2
stamp "engine start: region cache and detok-tail on, verifying every request"
export FRANK_REGION_CACHE_VERIFY=all FRANK_DETOK_TAIL_VERIFY=all
start --knob region_cache=on --knob detok_tail=on
stamp "replay w01-mini draw-1, region cache and detok-tail on (verify all)"
frank replay w01-mini --draws draw-1 --json >"$LOG/replay-on.json" 2>"$LOG/replay-on.err"
echo "replay exit $?"; tail -3 "$LOG/replay-on.err"; head -c 3000 "$LOG/replay-on.json"; echo
python3 "$TREE/scripts/engine_control_get.py" /frank/parts /frank/region-cache >"$LOG/control-2.json" 2>&1
head -c 4000 "$LOG/control-2.json"; echo
frank engine stop --json >"$LOG/engine-stop-2.json"
unset FRANK_REGION_CACHE_VERIFY FRANK_DETOK_TAIL_VERIFY

if [ "$SECONDS" -lt "$BENCH_BY_S" ]; then
    stamp "the front-end part's quick check: detok-tail, 1+1 starts, w01-mini draw-1"
    frank bench part detok-tail --workload w01-mini --profile "$PROFILE" --starts-per-arm 1 --draws draw-1 \
        --json >"$LOG/bench-part-detok-tail.json" 2>"$LOG/bench-part-detok-tail.err"
    echo "bench exit $?"; tail -5 "$LOG/bench-part-detok-tail.err"
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print({k: r.get(k) for k in ("order","control_s","treatment_s","front_end_control_s","front_end_treatment_s","p","outputs_identical","prompt_ids_identical","verify_mismatches")})' "$LOG/bench-part-detok-tail.json"
else
    stamp "quick check skipped: $SECONDS s past, over $BENCH_BY_S"
fi
stamp "done"
