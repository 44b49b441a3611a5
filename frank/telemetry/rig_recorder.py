"""A rig recorder: the rig's fixed facts and conditions (frank.telemetry.rig) sampled beside one engine on a
sampler thread of its own (frank.telemetry.sampler), from `start()` to `stop()`. Only the engine's process
tree is read (its pid): its /metrics is never scraped, so the recorder sends the engine it watches nothing.
An experiment cell records its replay's conditions with one (frank.experiments.cell).
"""

from __future__ import annotations

import os

from frank.telemetry.rig import ConditionsTally, RigConditions, RigFacts, rig_facts
from frank.telemetry.sampler import Sampler, Snapshot, static_target

PERIOD_ENV = "FRANK_RIG_PERIOD_S"  # seconds between a cell's rig samples; 0 turns the recorder off
DEFAULT_PERIOD_S = 1.0


def recorder_period() -> float:
    """Seconds between a cell's rig samples (FRANK_RIG_PERIOD_S; 0: no recorder)."""
    try:
        return max(0.0, float(os.environ.get(PERIOD_ENV, DEFAULT_PERIOD_S)))
    except ValueError:
        return DEFAULT_PERIOD_S


class RigRecorder:
    """Samples the rig beside one engine on a sampler thread of its own, from `start()` to `stop()`, which
    returns (facts, conditions). The engine's /metrics is not scraped: only its process tree is read."""

    def __init__(self, engine_pid: int | None, period_s: float | None = None, sampler: Sampler | None = None) -> None:
        self.period_s = recorder_period() if period_s is None else period_s
        self.tally = ConditionsTally()
        self._sampler = sampler or Sampler(static_target(None, engine_pid), period_s=self.period_s or 1.0)
        self._facts: RigFacts | None = None
        self._sampler.subscribe(self._add)
        self._started = False

    def _add(self, snap: Snapshot) -> None:
        if self._facts is None:
            self._facts = rig_facts(snap.gpu, snap.cpu)
        if snap.seq > 1:  # the first sample only primes the CPU deltas (no rates yet)
            self.tally.add(snap.gpu, snap.cpu, snap.wall_time)

    def start(self) -> RigRecorder:
        if self.period_s > 0:
            self._sampler.start()
            self._started = True
        return self

    def stop(self) -> tuple[RigFacts | None, RigConditions | None]:
        if not self._started:
            return None, None
        self._sampler.stop(final=True)  # the stretch's end, however short it was
        self._started = False
        return self._facts, self.tally.conditions()
