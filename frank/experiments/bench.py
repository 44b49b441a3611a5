"""On/off tests of one knob over fresh engine starts: the region cache (`frank bench region-cache`) and a
front-end part (`frank bench part`), without a design file.

`region-cache` is the seed's registered region cache test, repeatable on the embedded engine. `part` runs
the same machinery for a front-end part (frank.plugins.front_end.catalog): the same balanced order, the
same exact test, prompt token IDs compared, and also the outputs (greedy, a few output tokens per request
so the first-token work counts), with client time per draw as the measure.

Fresh engine starts, N with the knob on and N with it off, in one balanced order drawn uniformly from a
recorded seed before any engine starts (frank.experiments.randomize.draw_balanced: the draw a registered
`balanced` design makes). Each start replays the workload in engine mode (one request at a time, a fresh
cache_salt per draw); its per-draw totals are frank.workloads.record's. The region cache's measure is the
server's own time outside queueing and prefill (TTFT - queue - prefill), summed per draw; a part's is the
client time per draw. Reported: the mean per draw of each arm, whether the prompt token IDs (and a part's
outputs) were identical in every start, and the exact permutation p (all C(2N, N) relabellings).

Engine starts use their own FRANK_HOME state dir under the run folder, so a running engine of the user's
is never touched. Progress goes to the `log` callback; the result is one JSON-able dict.
"""

from __future__ import annotations

import math
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from frank.errors import FrankError

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


@dataclass(frozen=True)
class BenchOptions:
    workload: str = "w01-mini"
    profile: str | None = None  # None: default_profile(workload)
    draws: tuple[str, ...] = ("draw-1", "draw-2", "draw-3")
    limit: int | None = None
    starts_per_arm: int = 2
    seed: int | None = None  # None: drawn and recorded
    out: Path | None = None
    output_tokens: int = 1
    base_knobs: tuple[str, ...] = field(default=())  # KNOB=VALUE set alike in both arms (bench part)


Log = Callable[[str], None]
LoadAvg = tuple[float, float, float]


@dataclass(frozen=True)
class BenchStart:
    """One fresh engine start of a bench: its replay's per-draw values and the part's own counters."""

    start: int
    arm: str  # "on" | "off"
    url: str
    run_dir: str
    ready_s: float
    elapsed_s: float
    load_avg_before: LoadAvg
    load_avg_after: LoadAvg
    front_end_per_draw_s: dict[str, float]
    front_end_mean_s: float
    cold_front_end_per_draw_s: float
    cold_requests_per_draw: float
    client_total_per_draw_s: dict[str, float]
    client_total_mean_s: float
    client_after_server_ttft_mean_s: float  # the hand-back, where the detokenizer's first step is
    prompt_ids_sha256: dict[str, str | None]
    outputs_sha256: dict[str, str | None]
    prompt_tokens: int
    counters_key: str  # "cache" (the region cache's stats) or "part" (the part's counters)
    counters: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["counters_key"], out["counters"]
        return out | {self.counters_key: self.counters}


@dataclass(frozen=True)
class _Bench:
    """What both benches print: their fields as JSON, `bench` naming which one."""

    bench: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"bench": self.bench}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "starts":
                value = [start.to_json() for start in value]
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True)
class RegionCacheBench(_Bench):
    """`frank bench region-cache`: the front-end time per draw of each arm and the exact test."""

    bench: ClassVar[str] = "region-cache"

    workload: str
    profile: str | None
    draws: tuple[str, ...]
    limit: int | None
    seed: int
    order: tuple[str, ...]
    orders: int
    starts_per_arm: int
    front_end_off_s: float
    front_end_on_s: float
    front_end_off_range_s: tuple[float, float]
    front_end_on_range_s: tuple[float, float]
    ratio: float | None
    saved_per_draw_s: float
    every_on_below_every_off: bool
    p_value: float
    null_size: int
    ids_identical: bool
    cold_front_end_on_s: float
    cold_front_end_off_s: float
    cold_extra_s: float
    cold_requests_per_draw: float
    starts: tuple[BenchStart, ...]
    out: str


@dataclass(frozen=True)
class PartBench(_Bench):
    """`frank bench part`: client time per draw of each arm, the exact test, outputs and prompts compared."""

    bench: ClassVar[str] = "part"

    part: str
    knob: str
    workload: str
    profile: str | None
    draws: tuple[str, ...]
    limit: int | None
    output_tokens: int
    base_knobs: dict[str, str]
    seed: int
    order: tuple[str, ...]
    orders: int
    starts_per_arm: int
    measure: str
    control_s: float
    treatment_s: float
    saved_s_per_draw: float
    control_range_s: tuple[float, float]
    treatment_range_s: tuple[float, float]
    front_end_control_s: float
    front_end_treatment_s: float
    client_after_server_ttft_control_s: float
    client_after_server_ttft_treatment_s: float
    every_treatment_below_every_control: bool
    p: float
    null_size: int
    outputs_identical: bool
    prompt_ids_identical: bool
    verify_mismatches: int
    load_avg_at_starts: tuple[float, ...]
    starts: tuple[BenchStart, ...]
    out: str


def _quiet(message: str) -> None:
    return None


def default_profile(workload: str) -> str:
    """The profile a workload runs on unless told: full-scale W01 needs the sliding-window model."""
    return FULL_SCALE_PROFILE if workload == "w01-full" else "embedded-cpu"


def bench_order(n: int, seed: int) -> list[str]:
    """One of the C(2n, n) balanced orders of "on" and "off" starts, uniformly."""
    from frank.experiments.randomize import draw_balanced

    return [s.arm for s in draw_balanced(("on", "off"), n, seed).slots]


def _region_cache_stats(url: str, token: str) -> dict[str, Any] | None:
    from frank.engine.region_cache_client import RegionCacheClient

    stats = RegionCacheClient(url, token).stats()
    return {key: stats.get(key) for key in REGION_CACHE_STATS}


def one_start(
    k: int,
    arm: str,
    opts: BenchOptions,
    workload: Path,
    out: Path,
    log: Log,
    knob: str = "region_cache",
    part_stats: Any = _region_cache_stats,
    base_knobs: dict[str, str] | None = None,
) -> BenchStart:
    """One fresh engine start with `knob` = arm: replay the draws, read the part's stats, stop."""
    from frank.engine.controller import EngineController
    from frank.workloads.replay import ReplayOptions, start_replay

    controller = EngineController(state_dir=out / f"start-{k}" / "state")
    t0 = time.monotonic()
    load_before = os.getloadavg()
    status = controller.start(opts.profile, {**(base_knobs or {}), knob: arm})
    ready_s = time.monotonic() - t0
    try:
        log(f"start {k + 1} ({arm}) ready in {ready_s:.0f} s at {status.url}")
        options = ReplayOptions(
            mode="engine", draws=tuple(opts.draws), limit=opts.limit, output_tokens=opts.output_tokens
        )
        runner = start_replay(workload, status.url, options, out=out / f"start-{k}" / "replay")
        summary = runner.run_sync()
        stats = part_stats(status.url, controller.token or "")
    finally:
        controller.stop()
    draws = {d: runner.tally(d).totals() for d in runner.draw_names}
    failed = sum(t.failed + t.unattributed for t in draws.values())
    if summary.state != "finished" or failed:
        raise FrankError(
            f"start {k} ({arm}): replay {summary.state} with {failed} failed or unattributed "
            f"requests: see {summary.run_dir}"
        )
    per_draw = {name: t.front_end_s for name, t in draws.items()}
    if any(v is None for v in per_draw.values()):
        raise FrankError(f"start {k} ({arm}): the engine exports no front-end time (no queue time in /metrics)")
    n = len(draws)
    return BenchStart(
        start=k + 1,
        arm=arm,
        url=status.url or "",
        run_dir=summary.run_dir,
        ready_s=round(ready_s, 1),
        elapsed_s=round(time.monotonic() - t0, 1),
        load_avg_before=load_before,
        load_avg_after=os.getloadavg(),
        front_end_per_draw_s={name: v for name, v in per_draw.items() if v is not None},
        front_end_mean_s=sum(v for v in per_draw.values() if v is not None) / n,
        cold_front_end_per_draw_s=sum(t.cold_front_end_s or 0.0 for t in draws.values()) / n,
        cold_requests_per_draw=sum(t.cold_requests for t in draws.values()) / n,
        client_total_per_draw_s={name: t.client_total_s for name, t in draws.items()},
        client_total_mean_s=sum(t.client_total_s for t in draws.values()) / n,
        client_after_server_ttft_mean_s=sum(t.client_ttft_s - (t.ttft_s or 0.0) for t in draws.values()) / n,
        prompt_ids_sha256={name: t.prompt_ids_sha256 for name, t in draws.items()},
        outputs_sha256={name: t.outputs_sha256 for name, t in draws.items()},
        prompt_tokens=sum(t.prompt_tokens for t in draws.values()),
        counters_key="cache" if knob == "region_cache" else "part",
        counters=stats,
    )


def _identical(per_start: list[dict[str, str | None]]) -> bool:
    """Every start recorded the same per-draw hashes, and none is missing."""
    hashes = {tuple(sorted(hashes.items())) for hashes in per_start}
    return len(hashes) == 1 and all(h for _, h in next(iter(hashes)))


def _run_folder(opts: BenchOptions, name: str) -> Path:
    from frank import paths

    bench_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    return paths.private_dir((opts.out or paths.runs_dir() / "bench" / f"{name}-{bench_id}").expanduser())


def run_region_cache(opts: BenchOptions, log: Log = _quiet) -> RegionCacheBench:
    from frank.experiments.exact import permutation_test
    from frank.workloads.catalog import resolve_workload

    n = opts.starts_per_arm
    if n < 2:
        raise FrankError(f"--starts-per-arm {n}: at least 2 (2+2 is the smallest balanced design worth a p)")
    opts = _with_profile(opts)
    seed = opts.seed if opts.seed is not None else secrets.randbits(64)
    order = bench_order(n, seed)
    workload = resolve_workload(opts.workload)
    out = _run_folder(opts, "region-cache")
    log(f"order {' '.join(order)} (seed {seed}, one of {math.comb(2 * n, n)}); results in {out}")
    starts = []
    for k, arm in enumerate(order):
        starts.append(one_start(k, arm, opts, workload, out, log))
        log(f"start {k + 1} ({arm}): {starts[-1].front_end_mean_s:.3f} s per draw outside queue and prefill")
    on = [s.front_end_mean_s for s in starts if s.arm == "on"]
    off = [s.front_end_mean_s for s in starts if s.arm == "off"]
    test = permutation_test(on, off, "lower")
    cold_on = [s.cold_front_end_per_draw_s for s in starts if s.arm == "on"]
    cold_off = [s.cold_front_end_per_draw_s for s in starts if s.arm == "off"]
    front_on, front_off = sum(on) / len(on), sum(off) / len(off)
    return RegionCacheBench(
        workload=str(workload),
        profile=opts.profile,
        draws=tuple(opts.draws),
        limit=opts.limit,
        seed=seed,
        order=tuple(order),
        orders=math.comb(2 * n, n),
        starts_per_arm=n,
        front_end_off_s=front_off,
        front_end_on_s=front_on,
        front_end_off_range_s=(min(off), max(off)),
        front_end_on_range_s=(min(on), max(on)),
        ratio=front_off / front_on if front_on else None,
        saved_per_draw_s=front_off - front_on,
        every_on_below_every_off=max(on) < min(off),
        p_value=test.p_value,
        null_size=test.null_size,
        ids_identical=_identical([s.prompt_ids_sha256 for s in starts]),
        cold_front_end_on_s=sum(cold_on) / len(cold_on),
        cold_front_end_off_s=sum(cold_off) / len(cold_off),
        cold_extra_s=sum(cold_on) / len(cold_on) - sum(cold_off) / len(cold_off),
        cold_requests_per_draw=starts[0].cold_requests_per_draw,
        starts=tuple(starts),
        out=str(out),
    )


def _with_profile(opts: BenchOptions) -> BenchOptions:
    from dataclasses import replace

    return replace(opts, profile=opts.profile or default_profile(opts.workload))


# -- a front-end part -----------------------------------------------------------------------------------


def _part_stats(name: str) -> Any:
    def stats(url: str, token: str) -> dict[str, Any] | None:
        from frank.engine.parts_client import PartsClient

        try:
            return dict(PartsClient(url, token).part(name))
        except FrankError as exc:  # the counters are a report, not the measure: say why they are missing
            return {"error": str(exc)}

    return stats


def parse_base_knobs(items: list[str] | tuple[str, ...], part_knob: str) -> dict[str, str]:
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


def run_part(name: str | None, opts: BenchOptions, log: Log = _quiet) -> PartBench:
    from frank.experiments.exact import permutation_test
    from frank.plugins.front_end.catalog import PARTS
    from frank.workloads.catalog import resolve_workload

    part = PARTS.get(name or "")
    if part is None:
        raise FrankError(f"bench part {name!r}: expected one of {', '.join(PARTS)} (frank bench part --list)")
    n = opts.starts_per_arm
    if n < 1:
        raise FrankError(f"--starts-per-arm {n}: at least 1")
    if opts.output_tokens < 1:
        raise FrankError(f"--output-tokens {opts.output_tokens}: at least 1")
    opts = _with_profile(opts)
    base_knobs = parse_base_knobs(opts.base_knobs or PART_BASE_KNOBS, part.knob)
    seed = opts.seed if opts.seed is not None else secrets.randbits(64)
    order = bench_order(n, seed)
    workload = resolve_workload(opts.workload)
    out = _run_folder(opts, f"part-{part.name}")
    log(f"order {' '.join(order)} (seed {seed}, one of {math.comb(2 * n, n)}); results in {out}")
    starts = []
    for k, arm in enumerate(order):
        s = one_start(
            k, arm, opts, workload, out, log, knob=part.knob, part_stats=_part_stats(part.name), base_knobs=base_knobs
        )
        starts.append(s)
        log(
            f"start {k + 1} ({arm}): {s.client_total_mean_s:.3f} s per draw on the client, "
            f"{s.front_end_mean_s:.3f} s outside queue and prefill"
        )
    on = [s.client_total_mean_s for s in starts if s.arm == "on"]
    off = [s.client_total_mean_s for s in starts if s.arm == "off"]
    front_on = [s.front_end_mean_s for s in starts if s.arm == "on"]
    front_off = [s.front_end_mean_s for s in starts if s.arm == "off"]
    hand_on = [s.client_after_server_ttft_mean_s for s in starts if s.arm == "on"]
    hand_off = [s.client_after_server_ttft_mean_s for s in starts if s.arm == "off"]
    test = permutation_test(on, off, "lower")
    mismatches = sum(int(((s.counters or {}).get("counts") or {}).get("mismatches", 0)) for s in starts)
    return PartBench(
        part=part.name,
        knob=part.knob,
        workload=str(workload),
        profile=opts.profile,
        draws=tuple(opts.draws),
        limit=opts.limit,
        output_tokens=opts.output_tokens,
        base_knobs=base_knobs,
        seed=seed,
        order=tuple(order),
        orders=math.comb(2 * n, n),
        starts_per_arm=n,
        measure="client time per draw (s): sum over the draw's requests of send to last byte",
        control_s=sum(off) / len(off),
        treatment_s=sum(on) / len(on),
        saved_s_per_draw=sum(off) / len(off) - sum(on) / len(on),
        control_range_s=(min(off), max(off)),
        treatment_range_s=(min(on), max(on)),
        front_end_control_s=sum(front_off) / len(front_off),
        front_end_treatment_s=sum(front_on) / len(front_on),
        client_after_server_ttft_control_s=sum(hand_off) / len(hand_off),
        client_after_server_ttft_treatment_s=sum(hand_on) / len(hand_on),
        every_treatment_below_every_control=max(on) < min(off),
        p=test.p_value,
        null_size=test.null_size,
        outputs_identical=_identical([s.outputs_sha256 for s in starts]) and mismatches == 0,
        prompt_ids_identical=_identical([s.prompt_ids_sha256 for s in starts]),
        verify_mismatches=mismatches,
        load_avg_at_starts=tuple(s.load_avg_before[0] for s in starts),
        starts=tuple(starts),
        out=str(out),
    )
