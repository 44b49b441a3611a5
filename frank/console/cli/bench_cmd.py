"""`frank bench region-cache` and `frank bench part`: the CLI of frank.experiments.bench (on/off tests of one
knob over fresh engine starts). Progress goes to stderr; `--json` prints one object on stdout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from frank.console.cli.common import emit, emit_record
from frank.experiments.bench import PART_OUTPUT_TOKENS, PartBench, RegionCacheBench


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def _options(args: argparse.Namespace, output_tokens: int = 1) -> Any:
    from frank.experiments.bench import BenchOptions

    return BenchOptions(
        workload=args.workload,
        profile=args.profile,
        draws=tuple(args.draws),
        limit=args.limit,
        starts_per_arm=args.starts_per_arm,
        seed=args.seed,
        out=args.out,
        output_tokens=output_tokens,
        base_knobs=tuple(getattr(args, "base_knobs", None) or ()),
    )


def _log(bench: str) -> Any:
    return lambda message: print(f"[bench {bench}] {message}", file=sys.stderr, flush=True)


def _human(r: RegionCacheBench) -> str:
    lines = [
        f"region cache bench: {r.starts_per_arm}+{r.starts_per_arm} starts on {r.profile}, order "
        f"{' '.join(r.order)} (seed {r.seed}), draws {', '.join(r.draws)}"
    ]
    for s in r.starts:
        draws = " ".join(f"{v:.3f}" for v in s.front_end_per_draw_s.values())
        lines.append(
            f"  start {s.start} {s.arm:3}  {s.front_end_mean_s:.3f} s per draw [{draws}]  "
            f"(cold {s.cold_front_end_per_draw_s:.3f} s; start took {s.elapsed_s:.0f} s, "
            f"load {s.load_avg_before[0]:.1f})"
        )
    lines.append(
        f"front end per draw: off {r.front_end_off_s:.3f} s, on {r.front_end_on_s:.3f} s, "
        f"ratio {r.ratio:.1f}x, saved {r.saved_per_draw_s:.3f} s; p = {r.p_value:.4f} "
        f"(exact, {r.null_size} orders)"
    )
    lines.append(
        f"prompt token IDs identical in all starts: {r.ids_identical}; fresh-conversation requests "
        f"({r.cold_requests_per_draw:.0f} per draw): on {r.cold_front_end_on_s:.3f} s, off "
        f"{r.cold_front_end_off_s:.3f} s per draw, {r.cold_extra_s:+.3f} s with the cache"
    )
    return "\n".join(lines)


def cmd_region_cache(args: argparse.Namespace) -> int:
    from frank.experiments.bench import run_region_cache

    result = run_region_cache(_options(args), _log("region-cache"))
    emit_record(args.json, result, _human)
    return 0 if result.ids_identical else 1


# -- frank bench part ---------------------------------------------------------------------------------


def _human_part(r: PartBench) -> str:
    lines = [
        f"part {r.part} (knob {r.knob}): {r.starts_per_arm}+{r.starts_per_arm} starts on {r.profile}, "
        f"order {' '.join(r.order)} (seed {r.seed}), draws {', '.join(r.draws)}, "
        f"{r.output_tokens} output tokens per request"
    ]
    for s in r.starts:
        lines.append(
            f"  start {s.start} {s.arm:3}  client {s.client_total_mean_s:.3f} s per draw, front end "
            f"{s.front_end_mean_s:.3f} s (start took {s.elapsed_s:.0f} s, load {s.load_avg_before[0]:.1f})"
        )
    lines.append(
        f"client time per draw: off {r.control_s:.3f} s, on {r.treatment_s:.3f} s, saved "
        f"{r.saved_s_per_draw:.3f} s; p = {r.p:.4f} (exact, {r.null_size} orders); front end off "
        f"{r.front_end_control_s:.3f} s, on {r.front_end_treatment_s:.3f} s; client TTFT past the "
        f"server's off {r.client_after_server_ttft_control_s:.3f} s, "
        f"on {r.client_after_server_ttft_treatment_s:.3f} s"
    )
    lines.append(
        f"outputs identical in all starts: {r.outputs_identical}; prompt token IDs identical: {r.prompt_ids_identical}"
    )
    return "\n".join(lines)


def _human_list_row(p: dict[str, Any]) -> str:
    verified = ", ".join(p.get("verified_vllm") or []) or "none"
    compat = "compatible" if p.get("compatible") else "OFF: " + "; ".join(p.get("problems") or ["not checked"])
    return f"{p['name']:18} knob {p.get('knob') or '-':16} vLLM {verified} ({p.get('vllm')}: {compat})  {p['title']}"


def cmd_part(args: argparse.Namespace) -> int:
    from frank.experiments.bench import list_parts, run_part

    if args.list:
        parts = list_parts()
        emit(args.json, parts, lambda ps: "\n".join(_human_list_row(p) for p in ps))
        return 0
    result = run_part(args.part, _options(args, args.output_tokens), _log(args.part or "part"))
    emit_record(args.json, result, _human_part)
    return 0 if result.outputs_identical and result.prompt_ids_identical else 1
