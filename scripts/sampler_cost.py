"""The telemetry sampler's own CPU beside a busy CPU-expert pool: `frank telemetry --period 1 --json` (the real
CLI loop, per-thread view and expert pool included) runs as a child for --seconds after a warm-up, and its CPU
time (user + system) over that window is the cost, in percent of one core. The samples it printed give the
pool's busy share over the same window (start a load on the engine first: scripts/gpu_load.py).

    python3 scripts/sampler_cost.py [--seconds 30] [--warmup 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import psutil


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--warmup", type=float, default=5.0)
    p.add_argument("--out", help="also write the result here")
    args = p.parse_args(argv)
    duration = args.warmup + args.seconds + 2
    cmd = [
        sys.executable,
        "-m",
        "frank.console.cli",
        "telemetry",
        "--period",
        "1",
        "--json",
        "--duration",
        f"{duration:g}",
    ]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    proc = psutil.Process(child.pid)
    time.sleep(args.warmup)
    t0, c0 = time.monotonic(), sum(proc.cpu_times()[:2])
    time.sleep(args.seconds)
    t1, c1 = time.monotonic(), sum(proc.cpu_times()[:2])
    out, _ = child.communicate(timeout=60)
    samples = json.loads(out)["samples"]
    pools = [s["expert_pool"] for s in samples[int(args.warmup) :] if s.get("expert_pool")]
    result = {
        "sampler_cpu_percent_of_a_core": round(100 * (c1 - c0) / (t1 - t0), 3),
        "window_s": round(t1 - t0, 1),
        "samples": len(samples),
        "pool_size": pools[-1]["size"] if pools else None,
        "pool_busy_pct_mean": round(statistics.mean(p["busy_pct"] for p in pools), 1) if pools else None,
        "pool_cpu_percent_mean": round(statistics.mean(p["cpu_percent"] for p in pools), 1) if pools else None,
        "sample_cost_ms_median": round(statistics.median(s["cost_ms"]["total"] for s in samples), 3),
        "sample_cpu_part_ms_median": round(statistics.median(s["cost_ms"]["cpu"] for s in samples), 3),
    }
    print(json.dumps(result))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
