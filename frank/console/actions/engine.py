"""Engine actions: start, stop, restart, knobs (live or by restart), the region cache, quit + stop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from frank.console.actions.base import Actions
from frank.engine.controller import EngineController
from frank.engine.records import RUNNING_STATES


class EngineActions(Actions):
    def guard(self, what: str) -> bool:
        """The host's guard plus: while an experiment runner is alive, it owns the engine (one start per cell)."""
        if not self.host.guard(what):
            return False
        followed = self.host.state.experiments.followed
        state = followed.state if followed is not None else None
        if state is not None and state.status == "running":
            self.host.notify(
                f"{what}: experiment {state.run_id} is running and owns the engine; stop the run first "
                "(X on the experiments screen)",
                severity="warning",
                timeout=8,
            )
            return False
        return True

    @property
    def state(self) -> str:
        return self.host.state.engine.state

    def profile(self) -> str:
        from frank.engine.profiles import DEFAULT_PROFILE

        return self.host.state.engine.profile or self.host.services.profile or DEFAULT_PROFILE

    def start(self) -> None:
        if not self.guard("start"):
            return
        if self.state in RUNNING_STATES:
            self.host.notify("the engine is already running", severity="warning")
            return
        profile = self.profile()
        self.call(
            "start",
            "starting",
            lambda c: c.start(profile),
            lambda st: f"engine ready in {st.ready_s:.1f} s at {st.url}",
        )

    def stop(self) -> None:
        if not self.guard("stop"):
            return
        if self.state in ("stopped", "unknown"):
            self.host.notify("the engine is not running", severity="warning")
            return
        self.host.confirm(
            "Stop the engine?",
            self.inflight_warning("Stopping"),
            lambda: self.call("stop", "stopping", lambda c: c.stop(), lambda st: "engine stopped"),
            yes="Stop",
        )

    def restart(self) -> None:
        if not self.guard("restart"):
            return
        if self.state not in ("ready", "starting", "crashed"):
            self.host.notify("the engine is not running: start it with s", severity="warning")
            return
        self.host.confirm(
            "Restart the engine?",
            self.inflight_warning("Restarting"),
            lambda: self.call(
                "restart", "restarting", lambda c: c.restart(), lambda st: f"engine ready in {st.ready_s:.1f} s"
            ),
            yes="Restart",
        )

    def toggle_region_cache(self) -> None:
        status = self.host.state.engine.status
        current = (status.knobs if status is not None else {}).get("region_cache", "off")
        self.set_knob("region_cache", "off" if str(current) == "on" else "on")

    def set_knob(self, name: str, value: Any) -> None:
        """Flip a knob through the controller; a restart knob asks first when it would kill work."""
        if not self.guard(f"knob {name}"):
            return
        knob = self.host.state.engine.knob(name)
        if knob is None:
            self.host.notify(f"profile {self.profile()} has no knob {name!r}", severity="error")
            return
        running = self.state in RUNNING_STATES
        profile = self.profile()

        def flip() -> None:
            self.call(
                f"knob {name}",
                "restarting" if knob.needs_restart and running else f"setting {name}",
                lambda c: c.set_knob(name, value, profile=profile),
                lambda ch: f"{ch.name}: {ch.old} → {ch.new} ({ch.applied})",
            )

        if knob.needs_restart and running:
            self.host.confirm(
                f"Set {name} = {value}?",
                f"{name} is applied by restarting the engine.\n" + self.inflight_warning("Restarting"),
                flip,
                yes="Restart",
            )
        else:
            flip()

    def knobs(self) -> None:
        if not self.host.guard("knobs"):
            return
        from frank.console.screens.knobs import KnobScreen

        reading = self.host.state.engine
        values = dict(reading.status.knobs if reading.status is not None else {})
        knobs = {k.name: k for k in reading.knobs}

        def chosen(choice: tuple[str, Any] | None) -> None:
            if choice:
                self.set_knob(*choice)

        self.host.push_screen(KnobScreen(knobs, values), chosen)

    def inflight_warning(self, verb: str) -> str:
        """What an engine stop or restart does to the work running on it (jobs are named: they ask first)."""
        replays = [j for j in self.host.state.jobs.running if j.kind != "experiment"]
        if replays:
            names = ", ".join(f"{j.kind} {j.run_id} ({j.done}/{j.planned or '?'})" for j in replays[:3])
            return (
                f"{verb} the engine under a running job: {names}. Its request in flight fails and the job "
                f"ends failed; every finished request is kept and `frank replay --resume RUN` completes it."
            )
        return f"{verb} cuts off any request in flight."

    def call(self, name: str, busy: str, call: Callable[[EngineController], Any], done: Callable[[Any], str]) -> None:
        self.host.set_busy(busy)
        controller = self.host.services.controller
        self.in_thread("engine-action", lambda: done(call(controller)), self._done)

    def _done(self, message: str) -> None:
        self.host.set_busy("")
        self.host.notify(message, timeout=6)
        self.host.refresh_engine()

    def quit_stop(self) -> None:
        if not self.host.guard("quit and stop"):
            return

        def stop_then_quit() -> None:
            controller = self.host.services.controller
            self.host.set_busy("stopping")
            self.in_thread("engine-action", controller.stop, lambda _st: self.host.exit())

        self.host.confirm(
            "Stop the engine and quit?", self.inflight_warning("Stopping"), stop_then_quit, yes="Stop + quit"
        )
