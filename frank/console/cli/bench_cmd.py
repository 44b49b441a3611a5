"""`frank bench region-cache`: the seed's registered region cache test, repeatable on the embedded engine.

Fresh engine starts, N with the cache on and N with it off, in one balanced order drawn uniformly (from a
recorded seed) before any engine starts. Each start replays the synthetic W01 mini in engine mode (one
output token per request, one request at a time, a fresh cache_salt per draw) and the measure is the
server's own time outside queueing and prefill (TTFT - queue - prefill from vLLM's histograms), summed per
draw. Reported: the mean per draw of each arm, ratio off/on, whether the prompt token IDs (hashed per
request by the runner) were identical in every start, the extra cost with the cache on for the requests
that start a fresh conversation (turn 1), and the exact permutation p (all C(2N, N) relabellings).

Engine starts use their own FRANK_HOME state dir under the run folder, so a running engine of the user's
is never touched. Progress goes to stderr; `--json` prints one object on stdout.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from frank.console.cli.common import emit
from frank.errors import FrankError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks against the embedded engine")
    bsub = p.add_subparsers(dest="bench", metavar="BENCH", required=True)
    rc = bsub.add_parser("region-cache", help="region cache off vs on: balanced random engine starts, W01 mini")
    rc.add_argument("--starts-per-arm", type=int, default=2, help="engine starts per arm (>= 2; the seed used 4)")
    rc.add_argument("--seed", type=int, default=None, help="order seed (default: drawn and recorded)")
    rc.add_argument(
        "--draws",
        nargs="+",
        default=["draw-1", "draw-2", "draw-3"],
        metavar="DRAW",
        help="W01 draws each start replays (default: all three)",
    )
    rc.add_argument("--limit", type=int, default=None, help="only the first N requests of each draw")
    rc.add_argument(
        "--workload",
        default="w01-mini",
        help="workload (default: the built-in w01-mini; w01-full is the seed's full scale)",
    )
    rc.add_argument(
        "--profile",
        default=None,
        help="engine profile (default: embedded-cpu-swa for w01-full, whose 105K-181K-token prompts "
        "need its linear prefill; embedded-cpu otherwise)",
    )
    rc.add_argument("--out", type=Path, default=None, help="run folder (default: runs dir / bench / ID)")
    rc.add_argument("--json", action="store_true")
    rc.set_defaults(func=cmd_region_cache)


FULL_SCALE_PROFILE = "embedded-cpu-swa"


def default_profile(workload: str) -> str:
    """The profile a workload runs on unless told: full-scale W01 needs the sliding-window model."""
    return FULL_SCALE_PROFILE if workload == "w01-full" else "embedded-cpu"


def draw_order(n: int, seed: int) -> list[str]:
    """One of the C(2n, n) balanced orders, uniformly: the slots of the "on" starts are a uniform n-subset."""
    on = set(random.Random(seed).sample(range(2 * n), n))
    return ["on" if i in on else "off" for i in range(2 * n)]


def _log(message: str) -> None:
    print(f"[bench region-cache] {message}", file=sys.stderr, flush=True)


def _one_start(k: int, arm: str, args: argparse.Namespace, workload: Path, out: Path) -> dict[str, Any]:
    from frank.engine.controller import EngineController
    from frank.engine.region_cache.client import RegionCacheClient
    from frank.workloads.replay import ReplayOptions, start_replay

    controller = EngineController(state_dir=out / f"start-{k}" / "state")
    t0 = time.monotonic()
    load_before = os.getloadavg()
    status = controller.start(args.profile, {"region_cache": arm})
    ready_s = time.monotonic() - t0
    try:
        _log(f"start {k + 1} ({arm}) ready in {ready_s:.0f} s at {status.url}")
        options = ReplayOptions(mode="engine", draws=tuple(args.draws), limit=args.limit)
        summary = start_replay(workload, status.url, options, out=out / f"start-{k}" / "replay").run_sync()
        stats = RegionCacheClient(status.url, controller.token or "").stats()
    finally:
        controller.stop()
    draws = summary["draws"]
    failed = sum(d["failed"] for d in draws.values()) + sum(d["unattributed"] for d in draws.values())
    if summary["state"] != "finished" or failed:
        raise FrankError(
            f"start {k} ({arm}): replay {summary['state']} with {failed} failed or unattributed "
            f"requests: see {summary['run_dir']}"
        )
    per_draw = {name: d["front_end_s"] for name, d in draws.items()}
    return {
        "start": k + 1,
        "arm": arm,
        "url": status.url,
        "run_dir": summary["run_dir"],
        "ready_s": round(ready_s, 1),
        "elapsed_s": round(time.monotonic() - t0, 1),
        "load_avg_before": load_before,
        "load_avg_after": os.getloadavg(),
        "front_end_per_draw_s": per_draw,
        "front_end_mean_s": sum(per_draw.values()) / len(per_draw),
        "cold_front_end_per_draw_s": sum(d["cold_front_end_s"] for d in draws.values()) / len(draws),
        "cold_requests_per_draw": sum(d["cold_requests"] for d in draws.values()) / len(draws),
        "prompt_ids_sha256": {name: d["prompt_ids_sha256"] for name, d in draws.items()},
        "prompt_tokens": sum(d["prompt_tokens"] for d in draws.values()),
        "cache": {
            key: stats.get(key)
            for key in (
                "enabled",
                "requests",
                "hits",
                "misses",
                "hit_tokens",
                "miss_tokens",
                "seconds_saved",
                "mismatches",
                "errors",
                "fallbacks",
                "checks_skipped",
                "entries",
                "tokens_held",
                "bytes_held",
            )
        },
    }


def run_region_cache(args: argparse.Namespace) -> dict[str, Any]:
    from frank import paths
    from frank.experiments.exact import permutation_test
    from frank.workloads.catalog import resolve_workload

    n = args.starts_per_arm
    args.profile = args.profile or default_profile(args.workload)
    if n < 2:
        raise FrankError(f"--starts-per-arm {n}: at least 2 (2+2 is the smallest balanced design worth a p)")
    seed = args.seed if args.seed is not None else secrets.randbits(64)
    order = draw_order(n, seed)
    workload = resolve_workload(args.workload)
    bench_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    out = paths.private_dir((args.out or paths.runs_dir() / "bench" / f"region-cache-{bench_id}").expanduser())
    _log(f"order {' '.join(order)} (seed {seed}, one of {math.comb(2 * n, n)}); results in {out}")
    starts = []
    for k, arm in enumerate(order):
        starts.append(_one_start(k, arm, args, workload, out))
        _log(f"start {k + 1} ({arm}): {starts[-1]['front_end_mean_s']:.3f} s per draw outside queue and prefill")
    on = [s["front_end_mean_s"] for s in starts if s["arm"] == "on"]
    off = [s["front_end_mean_s"] for s in starts if s["arm"] == "off"]
    hashes = {tuple(sorted(s["prompt_ids_sha256"].items())) for s in starts}
    ids_identical = len(hashes) == 1 and all(h for _, h in next(iter(hashes)))
    test = permutation_test(on, off, "lower")
    cold_on = [s["cold_front_end_per_draw_s"] for s in starts if s["arm"] == "on"]
    cold_off = [s["cold_front_end_per_draw_s"] for s in starts if s["arm"] == "off"]
    front_on, front_off = sum(on) / len(on), sum(off) / len(off)
    return {
        "bench": "region-cache",
        "workload": str(workload),
        "profile": args.profile,
        "draws": list(args.draws),
        "limit": args.limit,
        "seed": seed,
        "order": order,
        "orders": math.comb(2 * n, n),
        "starts_per_arm": n,
        "front_end_off_s": front_off,
        "front_end_on_s": front_on,
        "front_end_off_range_s": [min(off), max(off)],
        "front_end_on_range_s": [min(on), max(on)],
        "ratio": front_off / front_on if front_on else None,
        "saved_per_draw_s": front_off - front_on,
        "every_on_below_every_off": max(on) < min(off),
        "p_value": test.p_value,
        "null_size": test.null_size,
        "ids_identical": ids_identical,
        "cold_front_end_on_s": sum(cold_on) / len(cold_on),
        "cold_front_end_off_s": sum(cold_off) / len(cold_off),
        "cold_extra_s": sum(cold_on) / len(cold_on) - sum(cold_off) / len(cold_off),
        "cold_requests_per_draw": starts[0]["cold_requests_per_draw"],
        "starts": starts,
        "out": str(out),
    }


def _human(r: dict[str, Any]) -> str:
    lines = [
        f"region cache bench: {r['starts_per_arm']}+{r['starts_per_arm']} starts on {r['profile']}, order "
        f"{' '.join(r['order'])} (seed {r['seed']}), draws {', '.join(r['draws'])}"
    ]
    for s in r["starts"]:
        draws = " ".join(f"{v:.3f}" for v in s["front_end_per_draw_s"].values())
        lines.append(
            f"  start {s['start']} {s['arm']:3}  {s['front_end_mean_s']:.3f} s per draw [{draws}]  "
            f"(cold {s['cold_front_end_per_draw_s']:.3f} s; start took {s['elapsed_s']:.0f} s, "
            f"load {s['load_avg_before'][0]:.1f})"
        )
    lines.append(
        f"front end per draw: off {r['front_end_off_s']:.3f} s, on {r['front_end_on_s']:.3f} s, "
        f"ratio {r['ratio']:.1f}x, saved {r['saved_per_draw_s']:.3f} s; p = {r['p_value']:.4f} "
        f"(exact, {r['null_size']} orders)"
    )
    lines.append(
        f"prompt token IDs identical in all starts: {r['ids_identical']}; fresh-conversation requests "
        f"({r['cold_requests_per_draw']:.0f} per draw): on {r['cold_front_end_on_s']:.3f} s, off "
        f"{r['cold_front_end_off_s']:.3f} s per draw, {r['cold_extra_s']:+.3f} s with the cache"
    )
    return "\n".join(lines)


def cmd_region_cache(args: argparse.Namespace) -> int:
    result = run_region_cache(args)
    emit(args.json, result, _human)
    return 0 if result["ids_identical"] else 1
