"""Engine actions: start, stop, restart, knobs (live or by restart), the region cache, quit + stop."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import work

from frank.errors import FrankError

if TYPE_CHECKING:
    from frank.console.app import FrankApp

    _Base = FrankApp
else:
    _Base = object


class EngineActions(_Base):
    def guard(self, what: str) -> bool:
        """False (with a notification) when the console may not act now."""
        if self.read_only:
            self.notify(f"read-only console: {what} is disabled", severity="warning")
            return False
        if self.busy:
            self.notify(f"wait: the engine is {self.busy}", severity="warning")
            return False
        return True

    def engine_guard(self, what: str) -> bool:
        """guard() plus: while an experiment runner is alive, it owns the engine (one start per cell)."""
        if not self.guard(what):
            return False
        state = self.experiment_state
        if state is not None and state.status == "running":
            self.notify(
                f"{what}: experiment {state.run_id} is running and owns the engine; stop the run first "
                "(X on the experiments screen)",
                severity="warning",
                timeout=8,
            )
            return False
        return True

    @property
    def engine_state(self) -> str:
        return getattr(self.engine_status, "state", "unknown")

    def profile_for_start(self) -> str:
        from frank.engine.profiles import DEFAULT_PROFILE

        return self.services.profile or getattr(self.engine_status, "profile", None) or DEFAULT_PROFILE

    def action_engine_start(self) -> None:
        if not self.engine_guard("start"):
            return
        if self.engine_state in ("ready", "starting"):
            self.notify("the engine is already running", severity="warning")
            return
        self._engine_call(
            "start",
            "starting",
            lambda c: c.start(self.profile_for_start()),
            lambda st: f"engine ready in {st.ready_s:.1f} s at {st.url}",
        )

    def action_engine_stop(self) -> None:
        if not self.engine_guard("stop"):
            return
        if self.engine_state in ("stopped", "unknown"):
            self.notify("the engine is not running", severity="warning")
            return
        self.confirm(
            "Stop the engine?",
            self._inflight_warning("Stopping"),
            lambda: self._engine_call("stop", "stopping", lambda c: c.stop(), lambda st: "engine stopped"),
            yes="Stop",
        )

    def action_engine_restart(self) -> None:
        if not self.engine_guard("restart"):
            return
        if self.engine_state not in ("ready", "starting", "crashed"):
            self.notify("the engine is not running: start it with s", severity="warning")
            return
        self.confirm(
            "Restart the engine?",
            self._inflight_warning("Restarting"),
            lambda: self._engine_call(
                "restart", "restarting", lambda c: c.restart(), lambda st: f"engine ready in {st.ready_s:.1f} s"
            ),
            yes="Restart",
        )

    def action_toggle_region_cache(self) -> None:
        values = dict(getattr(self.engine_status, "knobs", None) or {})
        current = values.get("region_cache", "off")
        self.set_knob("region_cache", "off" if str(current) == "on" else "on")

    def set_knob(self, name: str, value: Any) -> None:
        """Flip a knob through the controller; a restart knob asks first when it would kill work."""
        if not self.engine_guard(f"knob {name}"):
            return
        knob = self.profile_knobs().get(name)
        if knob is None:
            self.notify(f"profile {self.profile_for_start()} has no knob {name!r}", severity="error")
            return
        running = self.engine_state in ("ready", "starting")

        def flip() -> None:
            self._engine_call(
                f"knob {name}",
                "restarting" if knob.needs_restart and running else f"setting {name}",
                lambda c: c.set_knob(name, value, profile=self.profile_for_start()),
                lambda ch: f"{ch.name}: {ch.old} → {ch.new} ({ch.applied})",
            )

        if knob.needs_restart and running:
            self.confirm(
                f"Set {name} = {value}?",
                f"{name} is applied by restarting the engine.\n" + self._inflight_warning("Restarting"),
                flip,
                yes="Restart",
            )
        else:
            flip()

    def profile_knobs(self) -> dict[str, Any]:
        """The profile's knobs, re-read at most every 30 s (the dashboard asks on every redraw)."""
        from frank.engine.profiles import load_profile

        name = self.profile_for_start()
        cached = self._knobs_cache
        if cached is not None and cached[0] == name and time.monotonic() - cached[1] < 30:
            return cached[2]
        try:
            knobs = dict(load_profile(name).knobs)
        except FrankError:
            knobs = {}
        self._knobs_cache = (name, time.monotonic(), knobs)
        return knobs

    def action_knobs(self) -> None:
        if not self.guard("knobs"):
            return
        from frank.console.screens.knobs import KnobScreen

        knobs = self.profile_knobs()
        values = dict(getattr(self.engine_status, "knobs", None) or {})
        self.push_screen(KnobScreen(knobs, values), lambda choice: choice and self.set_knob(*choice))

    def _inflight_warning(self, verb: str) -> str:
        """What an engine stop or restart does to the work running on it (jobs are named: they ask first)."""
        replays = [j for j in self.running_jobs if j.kind != "experiment"]
        if replays:
            names = ", ".join(f"{j.kind} {j.run_id} ({j.done}/{j.planned or '?'})" for j in replays[:3])
            return (
                f"{verb} the engine under a running job: {names}. Its request in flight fails and the job "
                f"ends failed; every finished request is kept and `frank replay --resume RUN` completes it."
            )
        return f"{verb} cuts off any request in flight."

    def _engine_call(self, name: str, busy: str, call: Callable[[Any], Any], done: Callable[[Any], str]) -> None:
        self.busy = busy
        self.redraw()
        self._run_engine_call(name, call, done)

    @work(thread=True, exclusive=True, group="engine-action", exit_on_error=False)
    def _run_engine_call(self, name: str, call: Callable[[Any], Any], done: Callable[[Any], str]) -> None:
        result = call(self.services.controller)
        self.call_from_thread(self._engine_call_done, done(result))

    def _engine_call_done(self, message: str) -> None:
        self.busy = ""
        self.notify(message, timeout=6)
        self.refresh_status_now()

    def action_quit_stop(self) -> None:
        if not self.guard("quit and stop"):
            return

        def stop_then_quit() -> None:
            self._engine_call("stop", "stopping", lambda c: c.stop(), lambda st: "engine stopped")
            self.set_interval(0.3, lambda: self.exit() if not self.busy else None)

        self.confirm("Stop the engine and quit?", self._inflight_warning("Stopping"), stop_then_quit, yes="Stop + quit")
