"""exllamav3's own CPU-expert figures, read from the engine log: the cross-check of the CPU-expert wait that
frank reads from the pool's threads (frank.telemetry.expert_pool: an upper bound, since exllamav3's workers spin
between jobs).

Two kinds of lines, both printed by exllamav3 1.6.5 when the profile sets them (exl3-gpu-moe does):
- EXL3_MOE_CPU_PROF (exllamav3_ext/cpu/moe_mul1.cpp), every 512 jobs, the CPU worker's per-phase wall time
  averaged over every job since the worker started (one job: one layer's CPU experts for one step):
  ` -- moe_cpu prof (1024 jobs, us/job): prep_gu 1.0 | gemv_gu 20.5 (12.1 GB/s) | act+prep_d 0.4 |
  gemv_d 10.2 (11.0 GB/s) | tf_d/finish 0.3 | accum 0.2`
  The sum of the phases is the pool's compute time per job; times the jobs, the compute so far. Two lines
  apart give the compute between them.
- EXL3_SPLIT_PROF (exllamav3/modules/block_sparse_mlp_cpu.py), every 2048 brackets, the GPU stream's time in
  the collect step (waiting for the CPU's experts and reading them back: the stall the GPU could not hide),
  over those brackets only: ` -- split prof [wait] (2048 brackets, stream ms): med 0.081 p90 0.140 max 0.9 |
  worst layers L3:0.120 ...`

    python -m frank.engine.exl3.prof_log ENGINE_LOG [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

MOE_CPU = re.compile(r"-- moe_cpu prof \((\d+) jobs, us/job\): (.*)$")
PHASE = re.compile(r"([a-z_+/]+) ([0-9.]+)(?: \([0-9.]+ GB/s\))?")
SPLIT = re.compile(r"-- split prof \[(\w+)\] \((\d+) brackets, stream ms\): med ([0-9.]+) p90 ([0-9.]+) max ([0-9.]+)")


@dataclass(frozen=True)
class PoolProf:
    """One EXL3_MOE_CPU_PROF line: averages over every job since the worker started."""

    jobs: int
    us_per_job: dict[str, float]  # by phase, as exllamav3 names them

    @property
    def compute_s(self) -> float:
        """The pool's compute so far: the phases' sum per job, times the jobs."""
        return sum(self.us_per_job.values()) * self.jobs / 1e6


@dataclass(frozen=True)
class SplitProf:
    """One EXL3_SPLIT_PROF line: percentiles of the stream time of `brackets` issue or wait brackets."""

    kind: str  # "issue" (the fused enqueue) or "wait" (collect: the exposed stall)
    brackets: int
    median_ms: float
    p90_ms: float
    max_ms: float


@dataclass(frozen=True)
class ProfLog:
    pool: tuple[PoolProf, ...]
    split: tuple[SplitProf, ...]

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
        }


def parse(text: str) -> ProfLog:
    """Every profile line of an engine log, in order; other lines are ignored."""
    pool: list[PoolProf] = []
    split: list[SplitProf] = []
    for line in text.splitlines():
        if m := MOE_CPU.search(line):
            phases = {name: float(value) for name, value in PHASE.findall(m.group(2))}
            pool.append(PoolProf(int(m.group(1)), phases))
        elif m := SPLIT.search(line):
            kind, n, med, p90, top = m.groups()
            split.append(SplitProf(kind, int(n), float(med), float(p90), float(top)))
    return ProfLog(tuple(pool), tuple(split))


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
    if not prof.pool and not prof.split:
        print(f"{args.log}: no EXL3_MOE_CPU_PROF or EXL3_SPLIT_PROF lines (were they set, and were 512 jobs run?)")
        return 0
    if prof.pool:
        per_job = sum(prof.pool[-1].us_per_job.values())
        print(f"CPU pool: {out['jobs']} jobs, {out['compute_s']:.3f} s computed ({per_job:.1f} us a job)")
    for s in prof.split:
        print(f"split {s.kind}: {s.brackets} brackets, median {s.median_ms} ms, p90 {s.p90_ms} ms, max {s.max_ms} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
