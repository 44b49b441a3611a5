"""`frank bench region-cache` and `frank bench part`: on/off tests of one knob over fresh engine starts.

`region-cache` is the seed's registered region cache test, repeatable on the embedded engine. `part` runs
the same machinery for a front-end part (frank.plugins.front_end.catalog): the same balanced order, the
same exact test, prompt token IDs compared, and also the outputs (greedy, a few output tokens per request
so the first-token work counts), with client time per draw as the measure.

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

    part = bsub.add_parser("part", help="a front-end part off vs on: balanced random engine starts, W01 replay")
    part.add_argument("part", nargs="?", help="the part (see --list)")
    part.add_argument("--list", action="store_true", help="the parts and their knobs")
    part.add_argument("--starts-per-arm", type=int, default=1, help="engine starts per arm (the registered: 4)")
    part.add_argument("--seed", type=int, default=None, help="order seed (default: drawn and recorded)")
    part.add_argument("--draws", nargs="+", default=["draw-1", "draw-2", "draw-3"], metavar="DRAW")
    part.add_argument("--limit", type=int, default=None, help="only the first N requests of each draw")
    part.add_argument("--workload", default="w01-full", help="workload (default: w01-full, the seed's scale)")
    part.add_argument("--profile", default=None, help="engine profile (default: embedded-cpu-swa for w01-full)")
    part.add_argument("--output-tokens", type=int, default=PART_OUTPUT_TOKENS, help="greedy output tokens per request")
    part.add_argument(
        "--with",
        dest="base_knobs",
        action="append",
        default=None,
        metavar="KNOB=VALUE",
        help="a knob set alike in both arms (default: region_cache=on: the part is measured against the "
        "region cache alone; --with region_cache=off measures it without)",
    )
    part.add_argument("--out", type=Path, default=None, help="run folder (default: runs dir / bench / ID)")
    part.add_argument("--json", action="store_true")
    part.set_defaults(func=cmd_part)


FULL_SCALE_PROFILE = "embedded-cpu-swa"
PART_OUTPUT_TOKENS = 4  # a few, so the first output token's work (the detokenizer's) is in the client's time
PART_BASE_KNOBS = ("region_cache=on",)  # both arms: the parts cut what is left with the region cache on
REGION_CACHE_STATS = (
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


def default_profile(workload: str) -> str:
    """The profile a workload runs on unless told: full-scale W01 needs the sliding-window model."""
    return FULL_SCALE_PROFILE if workload == "w01-full" else "embedded-cpu"


def draw_order(n: int, seed: int) -> list[str]:
    """One of the C(2n, n) balanced orders, uniformly: the slots of the "on" starts are a uniform n-subset."""
    on = set(random.Random(seed).sample(range(2 * n), n))
    return ["on" if i in on else "off" for i in range(2 * n)]


def _log(message: str, bench: str = "region-cache") -> None:
    print(f"[bench {bench}] {message}", file=sys.stderr, flush=True)


def _region_cache_stats(url: str, token: str) -> dict[str, Any]:
    from frank.engine.region_cache_client import RegionCacheClient

    stats = RegionCacheClient(url, token).stats()
    return {key: stats.get(key) for key in REGION_CACHE_STATS}


def _one_start(
    k: int,
    arm: str,
    args: argparse.Namespace,
    workload: Path,
    out: Path,
    knob: str = "region_cache",
    part_stats: Any = _region_cache_stats,
    output_tokens: int = 1,
    bench: str = "region-cache",
    base_knobs: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One fresh engine start with `knob` = arm: replay the draws, read the part's stats, stop."""
    from frank.engine.controller import EngineController
    from frank.workloads.replay import ReplayOptions, start_replay

    controller = EngineController(state_dir=out / f"start-{k}" / "state")
    t0 = time.monotonic()
    load_before = os.getloadavg()
    status = controller.start(args.profile, {**(base_knobs or {}), knob: arm})
    ready_s = time.monotonic() - t0
    try:
        _log(f"start {k + 1} ({arm}) ready in {ready_s:.0f} s at {status.url}", bench)
        options = ReplayOptions(mode="engine", draws=tuple(args.draws), limit=args.limit, output_tokens=output_tokens)
        summary = start_replay(workload, status.url, options, out=out / f"start-{k}" / "replay").run_sync()
        stats = part_stats(status.url, controller.token or "")
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
        "client_total_per_draw_s": {name: d["client_total_s"] for name, d in draws.items()},
        "client_total_mean_s": sum(d["client_total_s"] for d in draws.values()) / len(draws),
        # the client's first token after the server's: the hand-back, where the detokenizer's first step is
        "client_after_server_ttft_mean_s": sum(d["client_ttft_s"] - d["ttft_s"] for d in draws.values()) / len(draws),
        "prompt_ids_sha256": {name: d["prompt_ids_sha256"] for name, d in draws.items()},
        "outputs_sha256": {name: d.get("outputs_sha256") for name, d in draws.items()},
        "prompt_tokens": sum(d["prompt_tokens"] for d in draws.values()),
        "cache" if knob == "region_cache" else "part": stats,
    }


def _identical(starts: list[dict[str, Any]], key: str) -> bool:
    """Every start recorded the same per-draw hashes under `key`, and none is missing."""
    hashes = {tuple(sorted(s[key].items())) for s in starts}
    return len(hashes) == 1 and all(h for _, h in next(iter(hashes)))


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
    ids_identical = _identical(starts, "prompt_ids_sha256")
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


# -- frank bench part ---------------------------------------------------------------------------------


def _part_stats(name: str) -> Any:
    def stats(url: str, token: str) -> dict[str, Any] | None:
        from frank.engine.parts_client import PartsClient

        try:
            return PartsClient(url, token).part(name)
        except FrankError as exc:  # the counters are a report, not the measure: say why they are missing
            return {"error": str(exc)}

    return stats


def parse_base_knobs(items: list[str], part_knob: str) -> dict[str, str]:
    """--with KNOB=VALUE items: knobs both arms share (never the part's own)."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise FrankError(f"--with {item!r}: expected KNOB=VALUE")
        if name.strip() == part_knob:
            raise FrankError(f"--with {item!r}: {part_knob} is the part's own knob (off in one arm, on in the other)")
        out[name.strip()] = value.strip()
    return out


# the vLLM plugins that are not front-end parts `frank bench part` runs (--list shows their verdicts too)
OTHER_PLUGINS = {
    "region-cache": {"knob": "region_cache", "title": "prompt region cache (frank bench region-cache)"},
    "idle-release": {"title": "held-prompt's engine core frees what requests leave behind in idle time"},
    "shm-idle": {"title": "vLLM's shared-memory readers sleep instead of spinning (FRANK_SHM_WAIT)"},
}


def list_parts() -> list[dict[str, Any]]:
    """The front-end parts, then the other vLLM plugins, each with the vLLM versions it was verified on and
    whether the engine venv's vLLM is compatible (checked there: frank.plugins.verified)."""
    from frank.engine.plugin_check import check_engine_vllm
    from frank.plugins.front_end.catalog import PARTS

    verdicts = {v["part"]: v for v in check_engine_vllm()}
    rows: list[dict[str, Any]] = [
        {
            "name": p.name,
            "knob": p.knob,
            "env": p.env,
            "verify_env": p.verify_env,
            "process": p.process,
            "title": p.title,
        }
        for p in PARTS.values()
    ]
    rows += [{"name": n, **OTHER_PLUGINS.get(n, {"title": "vLLM plugin"})} for n in verdicts if n not in PARTS]
    keys = ("verified_vllm", "compatible", "vllm", "problems")
    return [{**row, **{k: verdicts.get(row["name"], {}).get(k) for k in keys}} for row in rows]


def run_part(args: argparse.Namespace) -> dict[str, Any]:
    from frank import paths
    from frank.experiments.exact import permutation_test
    from frank.plugins.front_end.catalog import PARTS
    from frank.workloads.catalog import resolve_workload

    part = PARTS.get(args.part or "")
    if part is None:
        raise FrankError(f"bench part {args.part!r}: expected one of {', '.join(PARTS)} (frank bench part --list)")
    n = args.starts_per_arm
    if n < 1:
        raise FrankError(f"--starts-per-arm {n}: at least 1")
    if args.output_tokens < 1:
        raise FrankError(f"--output-tokens {args.output_tokens}: at least 1")
    args.profile = args.profile or default_profile(args.workload)
    base_knobs = parse_base_knobs(args.base_knobs or list(PART_BASE_KNOBS), part.knob)
    seed = args.seed if args.seed is not None else secrets.randbits(64)
    order = draw_order(n, seed)
    workload = resolve_workload(args.workload)
    bench_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    out = paths.private_dir((args.out or paths.runs_dir() / "bench" / f"part-{part.name}-{bench_id}").expanduser())
    _log(f"order {' '.join(order)} (seed {seed}, one of {math.comb(2 * n, n)}); results in {out}", part.name)
    starts = []
    for k, arm in enumerate(order):
        starts.append(
            _one_start(
                k,
                arm,
                args,
                workload,
                out,
                knob=part.knob,
                part_stats=_part_stats(part.name),
                output_tokens=args.output_tokens,
                bench=part.name,
                base_knobs=base_knobs,
            )
        )
        s = starts[-1]
        _log(
            f"start {k + 1} ({arm}): {s['client_total_mean_s']:.3f} s per draw on the client, "
            f"{s['front_end_mean_s']:.3f} s outside queue and prefill",
            part.name,
        )
    on = [s["client_total_mean_s"] for s in starts if s["arm"] == "on"]
    off = [s["client_total_mean_s"] for s in starts if s["arm"] == "off"]
    front_on = [s["front_end_mean_s"] for s in starts if s["arm"] == "on"]
    front_off = [s["front_end_mean_s"] for s in starts if s["arm"] == "off"]
    hand_on = [s["client_after_server_ttft_mean_s"] for s in starts if s["arm"] == "on"]
    hand_off = [s["client_after_server_ttft_mean_s"] for s in starts if s["arm"] == "off"]
    test = permutation_test(on, off, "lower")
    mismatches = sum(int(((s.get("part") or {}).get("counts") or {}).get("mismatches", 0)) for s in starts)
    return {
        "bench": "part",
        "part": part.name,
        "knob": part.knob,
        "workload": str(workload),
        "profile": args.profile,
        "draws": list(args.draws),
        "limit": args.limit,
        "output_tokens": args.output_tokens,
        "base_knobs": base_knobs,
        "seed": seed,
        "order": order,
        "orders": math.comb(2 * n, n),
        "starts_per_arm": n,
        "measure": "client time per draw (s): sum over the draw's requests of send to last byte",
        "control_s": sum(off) / len(off),
        "treatment_s": sum(on) / len(on),
        "saved_s_per_draw": sum(off) / len(off) - sum(on) / len(on),
        "control_range_s": [min(off), max(off)],
        "treatment_range_s": [min(on), max(on)],
        "front_end_control_s": sum(front_off) / len(front_off),
        "front_end_treatment_s": sum(front_on) / len(front_on),
        "client_after_server_ttft_control_s": sum(hand_off) / len(hand_off),
        "client_after_server_ttft_treatment_s": sum(hand_on) / len(hand_on),
        "every_treatment_below_every_control": max(on) < min(off),
        "p": test.p_value,
        "null_size": test.null_size,
        "outputs_identical": _identical(starts, "outputs_sha256") and mismatches == 0,
        "prompt_ids_identical": _identical(starts, "prompt_ids_sha256"),
        "verify_mismatches": mismatches,
        "load_avg_at_starts": [s["load_avg_before"][0] for s in starts],
        "starts": starts,
        "out": str(out),
    }


def _human_part(r: dict[str, Any]) -> str:
    lines = [
        f"part {r['part']} (knob {r['knob']}): {r['starts_per_arm']}+{r['starts_per_arm']} starts on {r['profile']}, "
        f"order {' '.join(r['order'])} (seed {r['seed']}), draws {', '.join(r['draws'])}, "
        f"{r['output_tokens']} output tokens per request"
    ]
    for s in r["starts"]:
        lines.append(
            f"  start {s['start']} {s['arm']:3}  client {s['client_total_mean_s']:.3f} s per draw, front end "
            f"{s['front_end_mean_s']:.3f} s (start took {s['elapsed_s']:.0f} s, load {s['load_avg_before'][0]:.1f})"
        )
    lines.append(
        f"client time per draw: off {r['control_s']:.3f} s, on {r['treatment_s']:.3f} s, saved "
        f"{r['saved_s_per_draw']:.3f} s; p = {r['p']:.4f} (exact, {r['null_size']} orders); front end off "
        f"{r['front_end_control_s']:.3f} s, on {r['front_end_treatment_s']:.3f} s; client TTFT past the "
        f"server's off {r['client_after_server_ttft_control_s']:.3f} s, "
        f"on {r['client_after_server_ttft_treatment_s']:.3f} s"
    )
    lines.append(
        f"outputs identical in all starts: {r['outputs_identical']}; prompt token IDs identical: "
        f"{r['prompt_ids_identical']}"
    )
    return "\n".join(lines)


def _human_list_row(p: dict[str, Any]) -> str:
    verified = ", ".join(p.get("verified_vllm") or []) or "none"
    compat = "compatible" if p.get("compatible") else "OFF: " + "; ".join(p.get("problems") or ["not checked"])
    return f"{p['name']:18} knob {p.get('knob') or '-':16} vLLM {verified} ({p.get('vllm')}: {compat})  {p['title']}"


def cmd_part(args: argparse.Namespace) -> int:
    if args.list:
        parts = list_parts()
        emit(args.json, parts, lambda ps: "\n".join(_human_list_row(p) for p in ps))
        return 0
    result = run_part(args)
    emit(args.json, result, _human_part)
    return 0 if result["outputs_identical"] and result["prompt_ids_identical"] else 1
