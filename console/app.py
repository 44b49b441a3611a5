"""The operator console: one Textual app over the headless layers (engine/, replays/).

The app holds no logic of its own: it renders the controller's status, the telemetry sampler's snapshots,
the replay runner's progress and the experiment journal, and turns keys into calls on those layers.

Threads and timing (dolphie / memray style):
- The telemetry Sampler owns one thread; the app reads `sampler.latest()` on a `refresh_s` timer and
  redraws only the active screen, only when the snapshot changed.
- Engine status and the log tail are polled in a thread worker, re-armed with `set_timer` after each
  poll ends (never overlapping); a slow or dead engine never blocks the event loop.
- Engine actions (start, stop, restart, knob flips) run in thread workers; errors become notifications.

Quitting leaves the engine (and a detached experiment) running; `quit_stop` stops the engine first.
"""
from __future__ import annotations

import argparse
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.worker import Worker, WorkerState

import themes
from console import config
from console.commands import FrankCommands
from console.log_follow import LogFollower
from console.screens.confirm import ConfirmDialog
from console.screens.help import HelpScreen
from engine.errors import FrankError

# Actions that change something: disabled in read-only mode.
MUTATING = {"engine_start", "engine_stop", "engine_restart", "toggle_region_cache", "knobs", "quit_stop",
            "replay_launch", "replay_cancel", "experiment_register", "experiment_run", "experiment_stop",
            "set_knob"}


@dataclass
class Services:
    """The headless objects the console drives; tests build their own (a fresh FRANK_HOME, no GPU)."""

    controller: Any
    sampler: Any | None = None                 # engine.telemetry.sampler.Sampler
    profile: str | None = None                 # profile for a start when no engine runs
    extra: dict[str, Any] = field(default_factory=dict)


def default_services(profile: str | None, refresh_s: float) -> Services:
    from engine.controller import EngineController
    from engine.telemetry.sampler import Sampler, controller_target

    controller = EngineController()
    return Services(controller=controller, sampler=Sampler(controller_target(controller), period_s=refresh_s),
                    profile=profile)


SCREENS = Binding.Group("screens", compact=True)
HEALTH_EVERY_S = 60.0   # once ready, the controller says ready whatever /health answers (see poll_engine)
STEADY_POLLS = 5          # while the engine is steady, poll its status every 5 refreshes
CONTROLLER_STATES = ("stopped", "starting", "ready", "crashed")


class FrankApp(App):
    TITLE = "frank"
    CSS_PATH = "frank.tcss"
    COMMANDS = App.COMMANDS | {FrankCommands}
    ENABLE_COMMAND_PALETTE = True
    MODES = {}  # filled in __init__ (screens import the app module's types)

    BINDINGS = [
        Binding("1", "switch_mode('dashboard')", "dashboard", id="mode.dashboard", group=SCREENS),
        Binding("2", "switch_mode('replays')", "replays", id="mode.replays", group=SCREENS),
        Binding("3", "switch_mode('experiments')", "experiments", id="mode.experiments", group=SCREENS),
        Binding("4", "switch_mode('logs')", "logs", id="mode.logs", group=SCREENS),
        Binding("s", "engine_start", "start", id="engine.start"),
        Binding("x", "engine_stop", "stop", id="engine.stop"),
        Binding("R", "engine_restart", "restart", id="engine.restart", show=False),
        Binding("c", "toggle_region_cache", "cache", id="engine.region_cache"),
        Binding("k", "knobs", "knobs", id="engine.knobs", show=False),
        Binding("t", "cycle_theme", "theme", id="app.theme", show=False),
        Binding("question_mark,f1", "help", "help", id="app.help"),
        Binding("q", "quit", "quit", id="app.quit"),
        Binding("Q", "quit_stop", "quit + stop engine", id="app.quit_stop", show=False),
        Binding("ctrl+p", "command_palette", "palette", id="app.palette", show=False),
    ]

    def __init__(self, services: Services, *, settings: config.Settings | None = None,
                 theme: str | None = None, read_only: bool = False, remember_theme: bool = True,
                 poll_status: bool = True) -> None:
        from console.screens.dashboard import DashboardScreen
        from console.screens.experiments import ExperimentsScreen
        from console.screens.logs import LogsScreen
        from console.screens.replays import ReplaysScreen

        self.MODES = {"dashboard": DashboardScreen, "replays": ReplaysScreen,
                      "experiments": ExperimentsScreen, "logs": LogsScreen}
        super().__init__()
        self.services = services
        self.settings = settings or config.Settings()
        self.read_only = read_only
        self.remember_theme = remember_theme
        self.poll_status = poll_status
        for t in themes.THEMES.values():
            self.register_theme(t)
        self.theme = themes.resolve(theme) or self.settings.theme
        self.engine_status: Any = None             # the controller's latest EngineStatus
        self.log_tail: list[str] = []
        self.snapshot: Any = None                  # the sampler's latest Snapshot
        self.busy = ""                             # an engine action in flight ("starting", ...)
        self.requests: list[tuple[str, Any]] = []  # (key, RequestDelta) of the last requests seen
        self.replay: Any = None                    # the console's ReplayJob, if one runs or ran
        self.followed_run: str | None = None       # the experiment run the console follows
        self.experiment_state: Any = None          # its ExperimentState (rebuilt from the journal)
        self.experiment_rule: Any = None
        self.experiment_report: dict[str, Any] | None = None
        self._last_request_obj: Any = None
        self._drawn_seq: Any = None
        self._sampler_state: str | None = None
        self._status_timer = None
        self._adopt_checked = False
        self._last_health = -1e9
        self._knobs_cache: tuple[str, float, dict[str, Any]] | None = None
        self._log_follower = LogFollower(self.settings.log_tail_lines)
        self.startup_notes: list[str] = []
        if self.settings.keymap:
            self.set_keymap(self.settings.keymap)

    # -- life cycle ------------------------------------------------------------------------------
    def on_mount(self) -> None:
        if self.services.sampler is not None:
            try:
                self.services.sampler.start()
            except Exception as exc:  # telemetry is a view; the console still controls the engine
                self.notify(f"telemetry did not start: {exc}", severity="error")
        self._update_title()
        self.switch_mode("dashboard")
        for note in self.startup_notes:
            self.notify(note, severity="warning", timeout=10)
        self.set_interval(self.settings.refresh_s, self.tick)
        if self.poll_status:
            self.poll_engine()

    def on_unmount(self) -> None:
        if self.services.sampler is not None:
            self.services.sampler.stop(timeout=2.0)

    def tick(self) -> None:
        """Apply the newest snapshot to the visible screen, only if it changed."""
        sampler = self.services.sampler
        snap = sampler.latest() if sampler is not None else None
        if snap is not None:
            self.snapshot = snap
            self._note_request(snap)
            # The sampler reads the controller's state every refresh: a change it sees polls status at once
            # (the status poll itself is slow while steady).
            seen = getattr(getattr(snap, "engine", None), "state", None)
            if seen != self._sampler_state:
                if self._sampler_state is not None and seen in CONTROLLER_STATES and seen != self.engine_state:
                    self.refresh_status_now()
                self._sampler_state = seen
        key = (getattr(snap, "seq", None), self.engine_status, len(self.log_tail) and self.log_tail[-1], self.busy,
               getattr(self.experiment_state, "events", None), getattr(self.experiment_state, "status", None),
               getattr(self.replay, "version", None))
        if key == self._drawn_seq:
            return
        self._drawn_seq = key
        self.redraw()

    def redraw(self) -> None:
        screen = self.screen
        if hasattr(screen, "refresh_view"):
            with self.batch_update():
                screen.refresh_view()

    def _note_request(self, snap: Any) -> None:
        last = getattr(getattr(snap, "engine", None), "last_request", None)
        if last is not None and last is not self._last_request_obj:
            self._last_request_obj = last
            self.requests.append((time.strftime("%H:%M:%S", time.localtime(snap.wall_time)), last))
            del self.requests[:-8]

    # -- engine status polling (thread; re-armed after each poll) ----------------------------------
    @work(thread=True, exclusive=True, group="status", exit_on_error=False)
    def poll_engine(self) -> None:
        controller = self.services.controller
        # /health while starting (it decides "ready") and otherwise rarely: each check is a new HTTP client
        # and an access-log line, and the sampler's 1 Hz /metrics scrape already shows an unreachable engine.
        now = time.monotonic()
        check = now - self._last_health >= HEALTH_EVERY_S or self.engine_state not in ("ready", "stopped")
        status = controller.status(check_health=check)
        if check:
            self._last_health = now
        tail = self._tail(status) if self.settings.log_tail_lines else []
        experiment = self._read_experiment()
        self.call_from_thread(self._set_status, status, tail, experiment)

    def _tail(self, status: Any) -> list[str]:
        """The log's last lines; each poll reads only what was appended since the last one."""
        path = getattr(status, "log_path", None) or str(self.services.controller.log_path())
        return self._log_follower.lines(path)

    def _read_experiment(self) -> tuple[Any, Any, Any] | None:
        """(state, rule, report) of the followed run; on the first poll adopt a run whose runner is alive."""
        from replays.experiments import registry
        from replays.experiments.runner import load_state

        run_id = self.followed_run
        if run_id is None and not self._adopt_checked:
            self._adopt_checked = True
            run_id = running_experiment()
            if run_id is None:
                return None
        if run_id is None:
            return None
        try:
            run = registry.load_run(run_id)
        except FrankError as exc:
            return (None, None, {"error": str(exc)})
        state = load_state(run)
        report = None
        if state.status in ("finished", "failed", "stopped") and state.events != getattr(self, "_report_events", None):
            from replays.experiments.report import report_for_run
            try:
                report = report_for_run(run)
            except FrankError as exc:
                report = {"decision": f"no report: {exc}"}
            self._report_events = state.events
        elif state.status in ("finished", "failed", "stopped"):
            report = self.experiment_report
        return (state, run.design.rule, report)

    def _set_status(self, status: Any, tail: list[str], experiment: tuple[Any, Any, Any] | None = None) -> None:
        changed = getattr(self.engine_status, "state", None) != status.state
        self.engine_status = status
        self.log_tail = tail
        if experiment is not None:
            state, rule, report = experiment
            if state is None:
                self.notify(f"experiment: {report.get('error') if report else 'unreadable'}", severity="error")
                self.followed_run = None
            else:
                if self.followed_run is None:
                    self.notify(f"following the running experiment {state.run_id}", timeout=6)
                self.followed_run = state.run_id
                self.experiment_state, self.experiment_rule, self.experiment_report = state, rule, report
        self._update_title()
        if changed:
            self.tick()       # a state change shows at once; the rest on the next refresh tick

    def _update_title(self) -> None:
        status = self.engine_status
        if status is not None:
            self.sub_title = f"{status.profile or self.profile_for_start()} · {status.state}" + (
                " · read-only" if self.read_only else "")

    def _rearm_status(self) -> None:
        """Poll at the refresh rate while something changes; every STEADY_POLLS refreshes while steady (the
        sampler's snapshots carry the engine's state in between, and a change they show polls at once)."""
        if self.poll_status and self.is_running:
            steady = self.engine_state in ("ready", "stopped") and not self.busy and self.services.sampler is not None
            self._status_timer = self.set_timer(self.settings.refresh_s * (STEADY_POLLS if steady else 1),
                                                self.poll_engine)

    def refresh_status_now(self) -> None:
        if self._status_timer is not None:
            self._status_timer.stop()
        self.poll_engine()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.group == "status" and event.state in (WorkerState.SUCCESS, WorkerState.ERROR):
            if event.state == WorkerState.ERROR:
                self.notify(f"engine status: {worker.error}", severity="error", timeout=4)
            self._rearm_status()
        elif worker.group in ("experiment", "replay", "exp-lists") and event.state == WorkerState.ERROR:
            self.notify(_reason(worker.error), title=worker.group, severity="error", timeout=12)
        elif worker.group == "engine-action" and event.state == WorkerState.ERROR:
            self.busy = ""
            self.notify(_reason(worker.error), title=f"{worker.name} failed", severity="error", timeout=12)
            self.refresh_status_now()

    # -- engine actions ----------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.read_only and action in MUTATING:
            return None  # shown greyed out in the footer; the key does nothing
        return True

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
            self.notify(f"{what}: experiment {state.run_id} is running and owns the engine; stop the run first "
                        "(X on the experiments screen)", severity="warning", timeout=8)
            return False
        return True

    @property
    def engine_state(self) -> str:
        return getattr(self.engine_status, "state", "unknown")

    def profile_for_start(self) -> str:
        from engine.profiles import DEFAULT_PROFILE
        return self.services.profile or getattr(self.engine_status, "profile", None) or DEFAULT_PROFILE

    def action_engine_start(self) -> None:
        if not self.engine_guard("start"):
            return
        if self.engine_state in ("ready", "starting"):
            self.notify("the engine is already running", severity="warning")
            return
        self._engine_call("start", "starting", lambda c: c.start(self.profile_for_start()),
                          lambda st: f"engine ready in {st.ready_s:.1f} s at {st.url}")

    def action_engine_stop(self) -> None:
        if not self.engine_guard("stop"):
            return
        if self.engine_state in ("stopped", "unknown"):
            self.notify("the engine is not running", severity="warning")
            return
        self.confirm("Stop the engine?", self._inflight_warning("Stopping"),
                     lambda: self._engine_call("stop", "stopping", lambda c: c.stop(), lambda st: "engine stopped"),
                     yes="Stop")

    def action_engine_restart(self) -> None:
        if not self.engine_guard("restart"):
            return
        if self.engine_state not in ("ready", "starting", "crashed"):
            self.notify("the engine is not running: start it with s", severity="warning")
            return
        self.confirm("Restart the engine?", self._inflight_warning("Restarting"),
                     lambda: self._engine_call("restart", "restarting", lambda c: c.restart(),
                                               lambda st: f"engine ready in {st.ready_s:.1f} s"), yes="Restart")

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
            self._engine_call(f"knob {name}", "restarting" if knob.needs_restart and running else f"setting {name}",
                              lambda c: c.set_knob(name, value, profile=self.profile_for_start()),
                              lambda ch: f"{ch.name}: {ch.old} → {ch.new} ({ch.applied})")

        if knob.needs_restart and running:
            self.confirm(f"Set {name} = {value}?", f"{name} is applied by restarting the engine.\n"
                         + self._inflight_warning("Restarting"), flip, yes="Restart")
        else:
            flip()

    def profile_knobs(self) -> dict[str, Any]:
        """The profile's knobs, re-read at most every 30 s (the dashboard asks on every redraw)."""
        from engine.profiles import load_profile
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
        from console.screens.knobs import KnobScreen
        knobs = self.profile_knobs()
        values = dict(getattr(self.engine_status, "knobs", None) or {})
        self.push_screen(KnobScreen(knobs, values), lambda choice: choice and self.set_knob(*choice))

    def _inflight_warning(self, verb: str) -> str:
        job = self.replay
        if job is not None and getattr(job, "running", False):
            return f"{verb} kills the replay in flight ({job.title}); its finished requests are kept."
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

    # -- replays ----------------------------------------------------------------------------------
    def action_replay_launch(self) -> None:
        if not self.guard("replay"):
            return
        from console.screens.replays import ReplaysScreen
        screen = self.screen if isinstance(self.screen, ReplaysScreen) else None
        if screen is None:
            self.switch_mode("replays")
            self.notify("pick a workload, then enter or L", timeout=4)
            return
        if self.replay is not None and self.replay.running:
            self.notify("a replay is running: cancel it first (C)", severity="warning")
            return
        if self.engine_state != "ready":
            self.notify("the engine is not ready: start it first (s)", severity="warning")
            return
        key = screen.selected_workload()
        if key is None:
            self.notify("no workload selected", severity="warning")
            return
        try:
            options = screen.options()
        except ValueError as exc:
            self.notify(f"replay options: {exc}", severity="error")
            return
        self._launch_replay(key, options)

    @work(thread=True, exclusive=True, group="replay", exit_on_error=False)
    def _launch_replay(self, key: str, options: dict[str, Any]) -> None:
        from console.screens.replays import ReplayJob, workload_path
        from engine.profiles import load_profile
        from replays.runner import ReplayOptions, start_replay

        status = self.engine_status
        api_key = None
        try:
            api_key = load_profile(status.profile).api_key or None
        except FrankError:
            pass
        path = workload_path(key)   # a built-in W01 is generated here on first use (seconds)
        opts = ReplayOptions(mode=options["mode"], draws=options["draws"], limit=options["limit"], api_key=api_key)
        job_holder: list[ReplayJob] = []
        runner = start_replay(path, status.url, opts, progress=lambda p: job_holder[0].on_progress(p))
        job = ReplayJob(runner, f"{path.name} · {options['mode']}"
                        + (f" · draws {','.join(options['draws'])}" if options["draws"] else "")
                        + (f" · first {options['limit']}" if options["limit"] else ""))
        job_holder.append(job)
        self.call_from_thread(self._replay_started, job)

    def _replay_started(self, job: Any) -> None:
        from console.screens.replays import ReplaysScreen
        if isinstance(self.screen, ReplaysScreen):
            self.screen.reset_job_view()
        self.replay = job.start()
        self.notify(f"replay started: {job.title} → {job.runner.run_dir}", timeout=5)
        self.redraw()

    def action_replay_cancel(self) -> None:
        job = self.replay
        if job is None or not job.running:
            self.notify("no replay is running", severity="warning")
            return
        self.confirm("Cancel the replay?", "It stops after the request in flight; every finished request is "
                     "kept and the run can be resumed (frank replay --resume).", job.cancel, "Cancel replay")

    # -- experiments -------------------------------------------------------------------------------
    def follow_run(self, run_id: str | None) -> None:
        if run_id != self.followed_run:
            self.followed_run = run_id
            self.experiment_state = self.experiment_rule = self.experiment_report = None
            self._report_events = None
            self.refresh_status_now()

    def _experiments_screen(self) -> Any:
        from console.screens.experiments import ExperimentsScreen
        return self.screen if isinstance(self.screen, ExperimentsScreen) else None

    def action_experiment_register(self) -> None:
        if not self.guard("register"):
            return
        screen = self._experiments_screen()
        path = screen.selected_design() if screen else None
        if path is None:
            self.notify("open the experiments screen (3) and select a design first", severity="warning")
            return
        self._preview_registration(path)

    @work(thread=True, exclusive=True, group="experiment", exit_on_error=False)
    def _preview_registration(self, path: str) -> None:
        """Draw the order now with a fresh seed and show it; registering with that seed gives this order."""
        from replays.experiments import exact
        from replays.experiments.design import load_design
        from replays.experiments.randomize import draw_order, new_seed

        design = load_design(path, check_profiles=True)
        exact.check_reachable(design, path)
        seed = new_seed()
        lines = [f"design   {design.name} ({design.kind})", f"question {design.question}",
                 f"sha256   {design.sha256}"]
        if design.runnable:
            order = draw_order(design, seed)
            text = " ".join(f"{s.arm}" + (f"(b{s.block})" if s.block else "") for s in order.slots)
            lines.append(f"order    #{order.index} of {order.count}: {text}")
        size = exact.null_size(design)
        low = exact.smallest_p(design)
        lines.append(f"smallest p this design can reach: {exact.fraction(low, size) if low else '–'}"
                     + (f" (alpha {design.rule.alpha:g})" if design.rule.alpha is not None else ""))
        # -- power from measured noise (issue 13): console/power_preview.py
        from console.power_preview import power_lines
        lines.extend(power_lines(design))
        # --
        lines.append("Registering freezes the design and this order; it cannot be edited afterwards.")
        self.call_from_thread(self.confirm, f"Register {design.name}?", "\n".join(lines),
                              lambda: self._register_design(path, seed), "Register")

    @work(thread=True, exclusive=True, group="experiment", exit_on_error=False)
    def _register_design(self, path: str, seed: int) -> None:
        from replays.experiments import registry
        run = registry.register(path, seed=seed)
        def done() -> None:
            self.notify(f"registered {run.run_id} (sha256 {run.meta['design_sha256'][:12]}…)", timeout=8)
            screen = self._experiments_screen()
            if screen:
                screen.add_run(run.run_id)
            self.follow_run(run.run_id)
        self.call_from_thread(done)

    def action_experiment_run(self) -> None:
        if not self.guard("run"):
            return
        screen = self._experiments_screen()
        run_id = (screen.selected_run() if screen else None) or self.followed_run
        if run_id is None:
            self.notify("select a registered run first (experiments screen, 3)", severity="warning")
            return
        if self.engine_state in ("ready", "starting"):
            self.confirm("Run the experiment?", "The runner starts and stops the engine for every cell: the engine "
                         "running now is stopped first, with any request in flight.",
                         lambda: self._launch_run(run_id, stop_first=True), "Run")
        else:
            self._launch_run(run_id, stop_first=False)

    @work(thread=True, exclusive=True, group="experiment", exit_on_error=False)
    def _launch_run(self, run_id: str, stop_first: bool) -> None:
        from console.screens.experiments import launch_detached
        if stop_first:
            self.services.controller.stop()
        info = launch_detached(run_id)
        def done() -> None:
            self.notify(f"runner started (pid {info.get('pid')}); it survives this console. Log: {info.get('log')}",
                        timeout=8)
            self.follow_run(run_id)
        self.call_from_thread(done)

    def action_experiment_stop(self) -> None:
        if not self.guard("stop the run"):
            return
        state = self.experiment_state
        if state is None or not state.runner_pid:
            self.notify("no runner is running for the followed experiment", severity="warning")
            return
        def stop() -> None:
            try:
                os.kill(state.runner_pid, signal.SIGTERM)   # the runner records the cell as interrupted
                self.notify(f"asked runner {state.runner_pid} to stop; `r` resumes it later")
            except ProcessLookupError:
                self.notify("the runner had already ended")
        self.confirm("Stop the experiment runner?", "The cell in flight is recorded as interrupted and redone "
                     "from its engine start on resume, as the design's failure rule says.", stop, "Stop run")

    # -- app actions -------------------------------------------------------------------------------
    def confirm(self, title: str, body: str, then: Callable[[], Any], yes: str = "Yes") -> None:
        self.push_screen(ConfirmDialog(title, body, yes=yes), lambda ok: then() if ok else None)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.key_sections(), str(config.config_path())))

    def key_sections(self) -> list[tuple[str, list[tuple[str, str, str]]]]:
        """(title, [(key, description, binding id)]) for the app and the active screen, from the bindings."""
        def rows(bindings) -> list[tuple[str, str, str]]:
            out = []
            for b in bindings:
                binding = self._keymap_key(b)
                out.append((binding.replace(",", " "), b.description or b.action, b.id or ""))
            return out
        sections = [("everywhere", rows(self.BINDINGS))]
        screen_bindings = getattr(type(self.screen), "BINDINGS", [])
        if screen_bindings:
            sections.append((f"{getattr(self.screen, 'TITLE', None) or type(self.screen).__name__}",
                             rows([b for b in screen_bindings if isinstance(b, Binding)])))
        return sections

    def _keymap_key(self, b: Binding) -> str:
        return self.settings.keymap.get(b.id or "", b.key)

    def action_cycle_theme(self) -> None:
        names = list(themes.THEMES)
        current = names.index(self.theme) if self.theme in names else -1
        self.set_theme(names[(current + 1) % len(names)])

    def set_theme(self, name: str) -> None:
        resolved = themes.resolve(name) or name
        self.theme = resolved
        self.notify(f"theme {resolved}", timeout=2)
        if self.remember_theme:
            try:
                self.settings = config.Settings(**{**self.settings.__dict__, "theme": resolved})
                config.save(self.settings)
            except OSError as exc:
                self.notify(f"could not remember the theme: {exc}", severity="warning")

    def action_quit_stop(self) -> None:
        if not self.guard("quit and stop"):
            return
        def stop_then_quit() -> None:
            self._engine_call("stop", "stopping", lambda c: c.stop(), lambda st: "engine stopped")
            self.set_interval(0.3, lambda: self.exit() if not self.busy else None)
        self.confirm("Stop the engine and quit?", self._inflight_warning("Stopping"), stop_then_quit, yes="Stop + quit")

    def action_quit(self) -> None:
        job = self.replay
        if job is not None and getattr(job, "running", False):
            self.confirm("Quit during a replay?", "The replay runs inside the console and stops with it; finished "
                         "requests are kept on disk. The engine keeps running.", self.exit, yes="Quit")
            return
        self.exit()


def running_experiment() -> str | None:
    """The id of a registered run whose runner is alive (the console adopts it at start)."""
    from replays.experiments import registry
    from replays.experiments.runner import lock_holder

    for meta in reversed(registry.list_runs()):
        folder = registry.experiments_dir() / meta["run_id"]
        if lock_holder(folder / "runner.lock") is not None:
            return meta["run_id"]
    return None


def _reason(error: BaseException | None) -> str:
    if error is None:
        return "unknown error"
    if isinstance(error, FrankError):
        return str(error)
    return f"{type(error).__name__}: {error}"


def run_console(args: argparse.Namespace) -> int:
    settings, problems = config.load()
    theme, theme_problem = config.choose_theme(getattr(args, "theme", None), settings)
    services = default_services(getattr(args, "profile", None), settings.refresh_s)
    app = FrankApp(services, settings=settings, theme=theme, read_only=bool(getattr(args, "read_only", False)),
                   remember_theme=not os.environ.get("NO_COLOR"))
    app.startup_notes = [*problems, *([theme_problem] if theme_problem else [])]
    if getattr(args, "theme", None) and not theme_problem:
        settings = config.Settings(**{**settings.__dict__, "theme": theme})
        try:
            config.save(settings)   # a theme chosen by flag is remembered too
        except OSError:
            pass
    app.run()
    return 0
