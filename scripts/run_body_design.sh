#!/usr/bin/env bash
# The local body design (frank/experiments/designs/body-smollm2.toml) end to end, by hand: register, run as a
# detached job, wait for it (the load average every minute), then the report as text, JSON and HTML.
# Needs `make setup model` (SmolLM2 for both engines). Takes long: vLLM on SmolLM2 starts in minutes here,
# and each arm runs 18 episodes. Usage: scripts/run_body_design.sh [OUT_DIR]   (FRANK_HOME etc. as usual)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-body-run}
mkdir -p "$out"
frank=.venv/bin/frank
py=.venv/bin/python
field() { $py -c "import json, sys; print(json.load(sys.stdin)[\"$1\"])"; }

run_id=$($frank experiment register frank/experiments/designs/body-smollm2.toml --json | field run_id)
echo "registered $run_id" | tee "$out/run.txt"
t0=$(date +%s)
echo "start $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/load.txt"
$frank experiment run "$run_id" --detach
sleep 5
while [ "$($frank experiment status "$run_id" --json | field status)" = running ]; do
    sleep 60
    echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"
done
echo "end $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg), $(( $(date +%s) - t0 )) s" | tee -a "$out/load.txt"
$frank experiment report "$run_id" | tee "$out/report.txt"
$frank experiment report "$run_id" --json > "$out/report.json"
$frank experiment report "$run_id" --html "$out/report.html"
