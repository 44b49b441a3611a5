"""The engine: the controller's status, the log's last lines and the knobs of the profile, read in one
thread. While the engine changes (starting, stopping, crashed) every refresh; while it is steady every
STEADY_POLLS refreshes, because the sampler's snapshots carry its state in between and a change they show
asks for a read at once (the app calls poll_now)."""

from __future__ import annotations

import time
from dataclasses import replace

from frank.console.log_follow import FOLD_SPARE, LogFollower, fold_shutdown
from frank.console.messages import EngineRead
from frank.console.sources.base import Post, Source
from frank.console.state import EngineReading, StartHint
from frank.engine.controller import EngineController
from frank.engine.profiles import Knob
from frank.errors import FrankError

HEALTH_EVERY_S = 60.0  # once ready, the controller says ready whatever /health answers
STEADY_POLLS = 5
KNOBS_EVERY_S = 30.0  # the profile file is re-read this often (an edit shows without a restart)


class EngineSource(Source[EngineReading]):
    name = "engine"

    def __init__(
        self,
        post: Post,
        controller: EngineController,
        profile: str | None,
        refresh_s: float,
        tail_lines: int,
        *,
        telemetry: bool = True,
    ) -> None:
        super().__init__(post)
        self.controller = controller
        self.profile = profile  # --profile: the profile a start uses when no engine runs
        self.refresh_s = refresh_s
        self.telemetry = telemetry  # without a sampler nothing else notices a change: never slow down
        self.tail_lines = tail_lines
        self._follower = LogFollower(tail_lines + FOLD_SPARE) if tail_lines else None
        self._last_health = -1e9
        self._knobs: tuple[str, float, tuple[Knob, ...], StartHint | None] | None = None

    def message(self, view: EngineReading) -> EngineRead:
        return EngineRead(view)

    def interval(self) -> float:
        steady = self.last is not None and self.last.state in ("ready", "stopped") and self.telemetry
        return self.refresh_s * (STEADY_POLLS if steady else 1)

    def read(self) -> EngineReading:
        # /health while starting (it decides "ready") and otherwise rarely: each check is a new HTTP client
        # and an access-log line, and the sampler's 1 Hz /metrics scrape already shows an unreachable engine.
        now = time.monotonic()
        state = self.last.state if self.last is not None else "unknown"
        check = now - self._last_health >= HEALTH_EVERY_S or state not in ("ready", "stopped")
        status = self.controller.status(check_health=check)
        if check:
            self._last_health = now
        log_path = status.log_path or str(self.controller.log_path())
        tail: tuple[str, ...] = ()
        folded = 0
        if self._follower is not None:
            tail = tuple(self._follower.lines(log_path))
            if status.state == "stopped":  # a clean stop: vLLM's exit chatter is no error (the log keeps it)
                tail, folded = fold_shutdown(tail)
            tail = tail[-self.tail_lines :]
        profile = self.start_profile(status.profile)
        knobs, hint = self.profile_of(profile)
        if status.state == "stopped" and hint is not None:
            hint = replace(hint, last_ready_s=self.controller.files.last_ready(profile))
        return EngineReading(status, tail, profile, knobs, hint if status.state == "stopped" else None, folded)

    def start_profile(self, running: str | None) -> str:
        from frank.engine.profiles import DEFAULT_PROFILE

        return self.profile or running or DEFAULT_PROFILE

    def knobs_of(self, profile: str) -> tuple[Knob, ...]:
        return self.profile_of(profile)[0]

    def profile_of(self, profile: str) -> tuple[tuple[Knob, ...], StartHint | None]:
        """The profile's knobs and what a start of it is (None: the profile does not load)."""
        from frank.engine.profiles import load_profile

        cached = self._knobs
        if cached is not None and cached[0] == profile and time.monotonic() - cached[1] < KNOBS_EVERY_S:
            return cached[2], cached[3]
        try:
            loaded = load_profile(profile)
        except FrankError:
            knobs: tuple[Knob, ...] = ()
            hint = None
        else:
            knobs = tuple(loaded.knobs.values())
            hint = StartHint(loaded.description, loaded.kind, None, loaded.startup_timeout_s)
        self._knobs = (profile, time.monotonic(), knobs, hint)
        return knobs, hint
