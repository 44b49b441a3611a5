"""exllamav3's own CPU-expert figures, read from the engine log: the cross-check of the CPU-expert wait that
frank reads from the pool's threads (frank.telemetry.expert_pool: an upper bound, since exllamav3's workers spin
between jobs). The one home of these lines' formats: `parse` reads a finished log, and
frank.telemetry.cpu_decode reads the same lines live, one at a time (`parse_line`).

The lines, all printed by exllamav3 1.6.5 (file:line of the wheel's source):
- EXL3_MOE_CPU_PROF (exllamav3_ext/cpu/moe_mul1.cpp:3987), every 512 jobs, the CPU worker's per-phase wall time
  averaged over every job since the worker started (one job: one layer's CPU experts for one step):
  ` -- moe_cpu prof (1024 jobs, us/job): prep_gu 1.0 | gemv_gu 20.5 (12.1 GB/s) | act+prep_d 0.4 |
  gemv_d 10.2 (11.0 GB/s) | tf_d/finish 0.3 | accum 0.2`
  The sum of the phases is the pool's compute time per job; times the jobs, the compute so far.
- EXL3_SPLIT_PROF (exllamav3/modules/block_sparse_mlp_cpu.py:36), every 2048 wait brackets, the GPU stream's
  time in the collect step (waiting for the CPU's experts and reading them back: the stall the GPU could not
  hide), over those brackets only: ` -- split prof [wait] (2048 brackets, stream ms): med 0.081 p90 0.140
  max 0.900 | worst layers L3:0.120 ...` (and the same for [issue], the fused enqueue).
- at load (block_sparse_mlp_cpu.py:929), one line a split MoE layer, with its placement:
  ` -- CPU split experts (worker, dynamic): model.layers.3.mlp [43..64) of 64`
  (`static`, `dynamic`: the periodic hot/cold sweep, or `promote-on-miss`: the pinned arena's per-step moves).
- EXL3_MOE_HANDOFF_PROF (exllamav3_ext/cpu/moe_handoff.cu:544), every 64 jobs, the CPU worker's own view of
  its last 64 jobs, in ms a job (mean|max): the idle gap since its previous job, its spin waiting for the GPU
  to publish the job's inputs, and the job's compute; the jobs that selected no CPU-resident expert (skipped),
  and the CPU-resident experts selected a row: ` -- handoff prof (128 jobs, ms/job avg|max): gap 0.210|1.900
  spin 0.004|0.050 compute 0.035|0.090 | empty 3/64, cpu-assign/row 1.25`
- with EXL3_MOE_CPU_SWAP_DEBUG only: each sweep that swapped (block_sparse_mlp_cpu.py:150, none for a sweep
  that found nothing to swap) ` -- expert swap sweep: 3 swaps`, and promote-on-miss's running totals every
  128 steps (block_sparse_mlp_cpu.py:323) ` -- promote-on-miss: step 256, 5 promotions, 5 demotions, 0 in
  flight; ...`.

A line in one of these shapes whose numbers are not numbers (or not finite, or absurd) is refused whole: it
moves no figure.

    python -m frank.engine.exl3.prof_log ENGINE_LOG [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PHASES = ("prep_gu", "gemv_gu", "act+prep_d", "gemv_d", "tf_d/finish", "accum")  # moe_mul1.cpp's printf, in order
# A printf %.1f / %.3f or a Python :.3f figure; more digits than any real figure has are refused.
_N = r"([0-9]{1,12}(?:\.[0-9]{1,9})?)"
_INT = r"([0-9]{1,15})"
_BW = r"\([^()|]{0,32} GB/s\)"  # the phase's bandwidth: not a figure frank reads (nan when a phase never ran)
MOE_CPU = re.compile(
    rf"-- moe_cpu prof \({_INT} jobs, us/job\): prep_gu {_N} \| gemv_gu {_N} {_BW} \| act\+prep_d {_N} \| "
    rf"gemv_d {_N} {_BW} \| tf_d/finish {_N} \| accum {_N}(?![0-9.])"
)
SPLIT = re.compile(
    rf"-- split prof \[(issue|wait)\] \({_INT} brackets, stream ms\): med {_N} p90 {_N} max {_N}(?![0-9.])"
)
SPLIT_LAYER = re.compile(
    r"-- CPU split experts \(worker, (static|dynamic|promote-on-miss)\): (\S{1,256}) "
    r"\[([0-9]{1,6})\.\.([0-9]{1,6})\) of ([0-9]{1,6})"
)
HANDOFF = re.compile(
    rf"-- handoff prof \({_INT} jobs, ms/job avg\|max\): gap {_N}\|{_N} spin {_N}\|{_N} compute {_N}\|{_N} \| "
    rf"empty {_INT}/64, cpu-assign/row {_N}(?![0-9.])"
)
HANDOFF_WINDOW = 64  # jobs a handoff line covers (moe_handoff.cu: `++hp_jobs % 64`)
SWEEP = re.compile(rf"-- expert swap sweep: {_INT} swaps\b")
PROMOTE = re.compile(rf"-- promote-on-miss: step {_INT}, {_INT} promotions, {_INT} demotions, {_INT} in flight;")
MARKERS = (
    "-- moe_cpu prof",
    "-- split prof",
    "-- handoff prof",
    "-- CPU split experts",
    "-- expert swap sweep",
    "-- promote-on-miss",
)
LIMIT = 1e12  # no figure of these lines comes near it (a microsecond a job, a job count)


@dataclass(frozen=True)
class PoolProf:
    """One EXL3_MOE_CPU_PROF line: averages over every job since the worker started."""

    jobs: int
    us_per_job: dict[str, float]  # by phase, as exllamav3 names them

    @property
    def compute_us_per_job(self) -> float:
        return sum(self.us_per_job.values())

    @property
    def compute_s(self) -> float:
        """The pool's compute so far: the phases' sum per job, times the jobs."""
        return self.compute_us_per_job * self.jobs / 1e6


@dataclass(frozen=True)
class SplitProf:
    """One EXL3_SPLIT_PROF line: percentiles of the stream time of `brackets` issue or wait brackets."""

    kind: str  # "issue" (the fused enqueue) or "wait" (collect: the exposed stall)
    brackets: int
    median_ms: float
    p90_ms: float
    max_ms: float


@dataclass(frozen=True)
class HandoffProf:
    """One EXL3_MOE_HANDOFF_PROF line: the CPU worker's last HANDOFF_WINDOW jobs, ms a job (mean and max)."""

    jobs: int  # since the worker started (a multiple of HANDOFF_WINDOW)
    gap_ms: float  # idle since the previous job ended: no job queued
    gap_max_ms: float
    spin_ms: float  # a job taken, waiting for the GPU to publish its inputs: the pool waiting on the GPU
    spin_max_ms: float
    compute_ms: float  # the job's experts (a job that selected none is skipped, and counts near 0)
    compute_max_ms: float
    empty: int  # of the window's jobs, those that selected no CPU-resident expert
    assign_per_row: float  # CPU-resident experts selected a token row

    @property
    def busy_share(self) -> float | None:
        """The worker's compute over its whole time in the window (gap + spin + compute), 0-1."""
        total = self.gap_ms + self.spin_ms + self.compute_ms
        return self.compute_ms / total if total > 0 else None


@dataclass(frozen=True)
class SplitLayer:
    """One MoE layer split between the GPU and the CPU worker, as loaded."""

    key: str
    placement: str  # "static", "dynamic" or "promote-on-miss"
    first: int  # the first expert slot on the CPU
    experts: int


@dataclass(frozen=True)
class SwapSweep:
    """A dynamic-placement sweep that swapped experts (EXL3_MOE_CPU_SWAP_DEBUG; a sweep of none prints nothing)."""

    swaps: int


@dataclass(frozen=True)
class PromoteProf:
    """promote-on-miss's running totals (EXL3_MOE_CPU_SWAP_DEBUG), every 128 of its steps."""

    step: int
    promotions: int
    demotions: int
    in_flight: int


Event = PoolProf | SplitProf | HandoffProf | SplitLayer | SwapSweep | PromoteProf


def _figure(text: str) -> float | None:
    value = float(text)  # the pattern admits digits and one point only
    return value if math.isfinite(value) and value < LIMIT else None


def _count(text: str) -> int | None:
    value = int(text)
    return value if value < LIMIT else None


def looks_like(line: str) -> bool:
    """A line in the shape of one of these lines (it may still be refused)."""
    return "-- " in line and any(marker in line for marker in MARKERS)


def parse_line(line: str) -> Event | None:
    """The event one log line holds, or None: another line, or one of these refused (a number that is not one,
    a percentile order that cannot be, a count of zero where there must be some)."""
    if "-- " not in line:
        return None
    if m := MOE_CPU.search(line):
        jobs, values = _count(m.group(1)), [_figure(v) for v in m.groups()[1:]]
        if not jobs or any(v is None for v in values):
            return None
        return PoolProf(jobs, {name: float(v) for name, v in zip(PHASES, values) if v is not None})
    if m := SPLIT.search(line):
        kind, n = m.group(1), _count(m.group(2))
        med, p90, top = (_figure(v) for v in m.groups()[2:])
        if not n or med is None or p90 is None or top is None or not med <= p90 <= top:
            return None
        return SplitProf(kind, n, med, p90, top)
    if m := HANDOFF.search(line):
        jobs, empty = _count(m.group(1)), _count(m.group(8))
        figures = [_figure(v) for v in (*m.groups()[1:7], m.group(9))]
        if not jobs or jobs % HANDOFF_WINDOW or empty is None or empty > HANDOFF_WINDOW:
            return None
        if any(v is None for v in figures):
            return None
        gap, gap_max, spin, spin_max, comp, comp_max, assign = (float(v or 0.0) for v in figures)
        if gap > gap_max or spin > spin_max or comp > comp_max:  # a mean above its window's max cannot be
            return None
        return HandoffProf(jobs, gap, gap_max, spin, spin_max, comp, comp_max, empty, assign)
    if m := SPLIT_LAYER.search(line):
        first, experts = int(m.group(3)), int(m.group(5))
        if int(m.group(4)) != experts or not 0 < first < experts:
            return None
        return SplitLayer(m.group(2), m.group(1), first, experts)
    if m := SWEEP.search(line):
        swaps = _count(m.group(1))
        return SwapSweep(swaps) if swaps is not None else None
    if m := PROMOTE.search(line):
        step, promoted, demoted, flight = (_count(v) for v in m.groups())
        if step is None or promoted is None or demoted is None or flight is None:
            return None
        return PromoteProf(step, promoted, demoted, flight)
    return None


@dataclass(frozen=True)
class ProfLog:
    pool: tuple[PoolProf, ...]
    split: tuple[SplitProf, ...]
    handoff: tuple[HandoffProf, ...] = ()

    def compute_between_s(self) -> float | None:
        """The pool's compute between its first and last line (None with fewer than two)."""
        if len(self.pool) < 2:
            return None
        return self.pool[-1].compute_s - self.pool[0].compute_s

    def to_json(self) -> dict[str, Any]:
        last = self.pool[-1] if self.pool else None
        return {
            "pool_lines": len(self.pool),
            "jobs": last.jobs if last else None,
            "us_per_job": last.us_per_job if last else None,
            "compute_s": round(last.compute_s, 6) if last else None,
            "compute_between_first_and_last_s": self.compute_between_s(),
            "split": [asdict(s) for s in self.split],
            "handoff_last": (
                {**asdict(self.handoff[-1]), "busy_share": self.handoff[-1].busy_share} if self.handoff else None
            ),
        }


def parse(text: str) -> ProfLog:
    """Every profile line of an engine log, in order; other lines (and refused ones) are ignored."""
    pool: list[PoolProf] = []
    split: list[SplitProf] = []
    handoff: list[HandoffProf] = []
    for line in text.splitlines():
        event = parse_line(line)
        if isinstance(event, PoolProf):
            pool.append(event)
        elif isinstance(event, SplitProf):
            split.append(event)
        elif isinstance(event, HandoffProf):
            handoff.append(event)
    return ProfLog(tuple(pool), tuple(split), tuple(handoff))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("log", type=Path)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        prof = parse(args.log.read_text(errors="replace"))
    except OSError as exc:
        print(f"prof_log: {args.log}: {exc.strerror}", file=sys.stderr)
        return 1
    out = prof.to_json()
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    if not prof.pool and not prof.split and not prof.handoff:
        print(f"{args.log}: no EXL3_MOE_CPU_PROF or EXL3_SPLIT_PROF lines (were they set, and were 512 jobs run?)")
        return 0
    if prof.pool:
        per_job = sum(prof.pool[-1].us_per_job.values())
        print(f"CPU pool: {out['jobs']} jobs, {out['compute_s']:.3f} s computed ({per_job:.1f} us a job)")
    for s in prof.split:
        print(f"split {s.kind}: {s.brackets} brackets, median {s.median_ms} ms, p90 {s.p90_ms} ms, max {s.max_ms} ms")
    if prof.handoff:
        h, busy = prof.handoff[-1], prof.handoff[-1].busy_share
        print(
            f"CPU worker, its last {HANDOFF_WINDOW} of {h.jobs} jobs: busy {'–' if busy is None else f'{busy:.0%}'}; "
            f"ms a job: gap {h.gap_ms}, spin {h.spin_ms}, compute {h.compute_ms}; {h.empty} selected no CPU expert"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
