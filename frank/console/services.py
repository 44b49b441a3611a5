"""What the console holds: the headless services it drives (typed) and the job it follows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from frank.engine.controller import EngineController
from frank.engine.telemetry.sampler import Sampler
from frank.jobs import JobStatus

REQUEST_ROWS = 200  # the followed job's newest records kept for the screens; older ones stay in its run folder


@dataclass
class Services:
    """The headless objects the console drives; tests build their own (a fresh FRANK_HOME, no GPU)."""

    controller: EngineController
    sampler: Sampler | None = None  # telemetry: one thread, snapshots read on the refresh tick
    profile: str | None = None  # profile for a start when no engine runs
    extra: dict[str, Any] = field(default_factory=dict)


def default_services(profile: str | None, refresh_s: float) -> Services:
    from frank.engine.telemetry.sampler import controller_target

    controller = EngineController()
    return Services(
        controller=controller, sampler=Sampler(controller_target(controller), period_s=refresh_s), profile=profile
    )


@dataclass
class FollowedJob:
    """The job the console follows (launched here or found running): its status and newest records."""

    run_id: str
    status: JobStatus | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    received: int = 0  # records received so far (a screen draws only the ones it has not drawn)
    version: int = 0

    def update(self, status: JobStatus, records: list[dict[str, Any]]) -> None:
        changed = records or status != self.status
        self.status = status
        if records:
            self.records = [*self.records, *records][-REQUEST_ROWS:]
            self.received += len(records)
        if changed:
            self.version += 1

    @property
    def running(self) -> bool:
        return self.status is not None and self.status.state == "running"
