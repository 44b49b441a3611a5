"""The headless services the console drives (typed); tests build their own (a fresh FRANK_HOME, no GPU)."""

from __future__ import annotations

from dataclasses import dataclass

from frank.engine.controller import EngineController
from frank.telemetry.sampler import Sampler


@dataclass
class Services:
    controller: EngineController
    sampler: Sampler | None = None  # telemetry: one thread; the telemetry source posts its snapshots
    profile: str | None = None  # profile for a start when no engine runs


def default_services(profile: str | None, refresh_s: float) -> Services:
    from frank.telemetry.sampler import controller_target

    controller = EngineController()
    return Services(
        controller=controller, sampler=Sampler(controller_target(controller), period_s=refresh_s), profile=profile
    )
