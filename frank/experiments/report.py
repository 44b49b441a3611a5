"""A registered run's report: its journal's finished starts as observations, analyzed under the design's
frozen rule (frank.experiments.analysis), with what the run adds (its id, order, attempts, measures, the
host of each block, and what stopping when decided saved)."""

from __future__ import annotations

from dataclasses import replace
from statistics import mean
from typing import TYPE_CHECKING

from frank.experiments.analysis import CostNotSpent, ExperimentReport, RunFacts, analyze
from frank.experiments.journal import Progress, fold, read_events
from frank.experiments.observations import Observation

if TYPE_CHECKING:
    from frank.experiments.registry import Run


def run_observations(run: Run, progress: Progress | None = None) -> tuple[list[Observation], dict[str, int], Progress]:
    """(observations, failed attempts per arm, journal progress) of a registered run's finished starts."""
    progress = progress if progress is not None else fold(read_events(run.journal_path))
    obs = []
    failed_attempts: dict[str, int] = {}
    for slot in run.slots:
        for a in progress.attempts.get(slot.slot, ()):
            if a.status == "failed":
                failed_attempts[slot.arm] = failed_attempts.get(slot.arm, 0) + 1
        done = progress.done(slot.slot)
        if done is None or (slot.block is not None and slot.block in progress.voided):
            continue
        if run.design.rule.test == "criteria":  # one observation per criterion's measure of the start
            for i, c in enumerate(run.design.rule.criteria):
                obs.append(
                    Observation(
                        start=slot.slot + 1,
                        block=slot.block,
                        arm=slot.arm,
                        value=float((done.measures or {})[c.measure]),
                        measure=c.measure,
                        failed_requests=done.failed if i == 0 else 0,
                        fidelity=done.fidelity if i == 0 else None,
                    )
                )
            continue
        obs.append(
            Observation(
                start=slot.slot + 1,
                block=slot.block,
                arm=slot.arm,
                value=float(done.value),
                measure=run.design.measure,
                failed_requests=done.failed,
                prompt_hashes=done.prompt_hashes,
                checks=done.checks or {},
                fidelity=done.fidelity,
                output_hashes=done.output_hashes,
                failures=done.failures,
            )
        )
    return obs, failed_attempts, progress


def report_for_run(run: Run) -> ExperimentReport:
    obs, failed_attempts, progress = run_observations(run)
    order = [s.to_json() for s in run.slots]
    report = analyze(
        run.design, obs, source="run", order=order, failed_attempts=failed_attempts, voided=progress.voided
    )
    done = {s.slot: progress.done(s.slot) for s in run.slots}
    ordered = run.meta.get("order") or {}
    facts = RunFacts(
        run_id=run.run_id,
        registered_at=run.meta.get("registered_at"),
        seed=ordered.get("seed"),
        order_index=ordered.get("index"),
        order_count=ordered.get("count"),
        attempts={
            str(s + 1): [
                {
                    "attempt": a.attempt,
                    "status": a.status,
                    "error": (a.closed or {}).get("error") or (a.closed or {}).get("reason"),
                }
                for a in progress.attempts.get(s, ())
            ]
            for s in sorted(progress.attempts)
        },
        measures={str(s.slot + 1): (r.measures if (r := done[s.slot]) else None) for s in run.slots},
        arms=[{"name": a.name, "profile": a.profile, "kind": _engine_kind(a.profile)} for a in run.design.arms],
        draws=[
            {"start": s.slot + 1, "arm": s.arm, **d}
            for s in run.slots
            if (r := done[s.slot]) is not None
            for d in (r.measures or {}).get("draws") or []
        ],
    )
    report = replace(report, run=facts)
    if report.stopped_when_decided is not None:
        report = replace(report, cost_not_spent=cost_not_spent(run, progress))
    if run.design.hosts:  # blocks over hosts: the host each block was dealt to
        from frank.experiments.randomize import hosts_by_slot

        dealt = hosts_by_slot(run.design.hosts, run.slots)
        report = replace(report, hosts={s.block: dealt[s.slot] for s in run.slots if s.block is not None})
    return report


def cost_not_spent(run: Run, progress: Progress) -> CostNotSpent:
    """What stopping when decided saved: the engine starts not run and, at the mean wall time of the cells
    that ran (cell_started to cell_done), their seconds."""
    durations = [
        a.closed["unix"] - a.started["unix"]
        for attempts in progress.attempts.values()
        for a in attempts
        if a.status == "done" and a.closed and "unix" in a.closed and "unix" in a.started
    ]
    left = sum(1 for s in run.slots if progress.done(s.slot) is None and s.block not in progress.voided)
    per_cell = mean(durations) if durations else None
    return CostNotSpent(
        starts_run=len(durations),
        starts_not_run=left,
        seconds_per_start=per_cell,
        seconds_spent=sum(durations),
        seconds_not_spent=per_cell * left if per_cell is not None else None,
    )


def _engine_kind(profile: str) -> str | None:
    from frank.engine.profiles import ProfileError, load_profile

    try:
        return load_profile(profile).kind
    except ProfileError:
        return None
