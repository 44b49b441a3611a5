"""The operator console: one Textual app over the headless layers (engine/, replays/).

The app holds no logic of its own: it renders the controller's status, the telemetry sampler's snapshots,
the jobs (frank.jobs) and the experiment journal, and turns keys into calls on those layers. Its actions
live by concern in frank/console/actions/ (engine, jobs, experiments); this module is the life cycle and the
data flow.

Data flow (memray's live view / harlequin): background workers never touch widgets; they post typed
messages (frank.console.messages: EngineStateChanged, JobsListed, JobProgressed, ExperimentFolded). The app keeps
the newest of each and passes it on to the active screen, which reacts; a screen shown later draws the kept
state. Timing:
- The telemetry Sampler owns one thread; the app reads `sampler.latest()` on a `refresh_s` timer and
  redraws only the active screen, only when the snapshot changed.
- Engine status and the log tail are polled in a thread worker, re-armed with `set_timer` after each
  poll ends (never overlapping); a slow or dead engine never blocks the event loop.
- Jobs are polled the same way (frank.console.actions.jobs): once a second while the followed job runs.

Quitting never stops a job or the engine, and asks nothing; `quit_stop` stops the engine first (asking,
and naming any job running on it).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.worker import Worker, WorkerState

from frank.console import config, themes
from frank.console.actions.engine import EngineActions
from frank.console.actions.experiments import ExperimentActions
from frank.console.actions.jobs import JobActions
from frank.console.commands import FrankCommands
from frank.console.log_follow import LogFollower
from frank.console.messages import EngineStateChanged
from frank.console.screens.confirm import ConfirmDialog
from frank.console.screens.help import HelpScreen
from frank.console.services import FollowedJob, Services, default_services  # noqa: F401  (Services: re-exported)
from frank.engine.controller import EngineStatus
from frank.errors import FrankError
from frank.experiments.runner import ExperimentState
from frank.jobs import JobStatus

# Actions that change something: disabled in read-only mode.
MUTATING = {
    "engine_start",
    "engine_stop",
    "engine_restart",
    "toggle_region_cache",
    "knobs",
    "quit_stop",
    "replay_launch",
    "replay_cancel",
    "experiment_register",
    "experiment_run",
    "experiment_stop",
    "set_knob",
}


SCREENS = Binding.Group("screens", compact=True)
HEALTH_EVERY_S = 60.0  # once ready, the controller says ready whatever /health answers (see poll_engine)
STEADY_POLLS = 5  # while the engine is steady, poll its status every 5 refreshes
CONTROLLER_STATES = ("stopped", "starting", "ready", "crashed")


class FrankApp(EngineActions, JobActions, ExperimentActions, App):
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
        Binding("5", "switch_mode('campaign')", "campaign", id="mode.campaign", group=SCREENS),
        Binding("6", "switch_mode('episodes')", "episodes", id="mode.episodes", group=SCREENS),
        Binding("s", "engine_start", "start", id="engine.start"),
        Binding("x", "engine_stop", "stop", id="engine.stop"),
        Binding("R", "engine_restart", "restart", id="engine.restart", show=False),
        Binding("c", "toggle_region_cache", "cache", id="frank.engine.region_cache"),
        Binding("k", "knobs", "knobs", id="engine.knobs", show=False),
        Binding("t", "cycle_theme", "theme", id="app.theme", show=False),
        Binding("question_mark,f1", "help", "help", id="app.help"),
        Binding("q", "quit", "quit", id="app.quit"),
        Binding("Q", "quit_stop", "quit + stop engine", id="app.quit_stop", show=False),
        Binding("ctrl+p", "command_palette", "palette", id="app.palette", show=False),
    ]

    def __init__(
        self,
        services: Services,
        *,
        settings: config.Settings | None = None,
        theme: str | None = None,
        read_only: bool = False,
        remember_theme: bool = True,
        poll_status: bool = True,
    ) -> None:
        from frank.console.screens.campaign import CampaignScreen
        from frank.console.screens.dashboard import DashboardScreen
        from frank.console.screens.episodes import EpisodesScreen
        from frank.console.screens.experiments import ExperimentsScreen
        from frank.console.screens.logs import LogsScreen
        from frank.console.screens.replays import ReplaysScreen

        self.MODES = {
            "dashboard": DashboardScreen,
            "replays": ReplaysScreen,
            "experiments": ExperimentsScreen,
            "logs": LogsScreen,
            "campaign": CampaignScreen,
            "episodes": EpisodesScreen,
        }
        super().__init__()
        self.services = services
        self.settings = settings or config.Settings()
        self.read_only = read_only
        self.remember_theme = remember_theme
        self.poll_status = poll_status
        for t in themes.THEMES.values():
            self.register_theme(t)
        self.theme = themes.resolve(theme) or self.settings.theme
        self.engine_status: EngineStatus | None = None  # the controller's latest (EngineStateChanged)
        self.log_tail: list[str] = []
        self.snapshot: Any = None  # the sampler's latest Snapshot
        self.busy = ""  # an engine action in flight ("starting", ...)
        self.requests: list[tuple[str, Any]] = []  # (key, RequestDelta) of the last requests seen
        self.running_jobs: list[JobStatus] = []  # every running job (JobsListed)
        self.job: FollowedJob | None = None  # the job this console follows (JobProgressed)
        self._follower: Any = None  # its frank.jobs.Follower (the jobs worker's)
        self._jobs_timer = None
        self._jobs_listed_at = -1e9
        self.followed_run: str | None = None  # the experiment run the console follows
        self.experiment_state: ExperimentState | None = None  # its journal folded (ExperimentFolded)
        self.experiment_rule: Any = None
        self.experiment_report: dict[str, Any] | None = None
        self._last_request_obj: Any = None
        self._drawn_seq: Any = None
        self._sampler_state: str | None = None
        self._status_timer = None
        self._adopt_checked = False
        self._report_events: int | None = None
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
            self.poll_jobs()
            from frank.console.screens.campaign import install_watch  # fired revert rules on any screen

            install_watch(self)

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
        key = (getattr(snap, "seq", None), self.engine_status, len(self.log_tail) and self.log_tail[-1], self.busy)
        if key == self._drawn_seq:
            return
        self._drawn_seq = key
        self.redraw()

    def redraw(self) -> None:
        screen = self.active_screen()
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
        self.post_message(EngineStateChanged(status, tail))
        folded = self.read_experiment()
        if folded is not None:
            self.post_message(folded)

    def _tail(self, status: Any) -> list[str]:
        """The log's last lines; each poll reads only what was appended since the last one."""
        path = getattr(status, "log_path", None) or str(self.services.controller.log_path())
        return self._log_follower.lines(path)

    def on_engine_state_changed(self, message: EngineStateChanged) -> None:
        changed = getattr(self.engine_status, "state", None) != message.status.state
        self.engine_status = message.status
        self.log_tail = message.log_tail
        self._update_title()
        if changed:
            self.tick()  # a state change shows at once; the rest on the next refresh tick
        self.forward(message)

    def forward(self, message: Any) -> None:
        """Pass a worker's message on to the active screen when it reacts to that kind of message."""
        screen = self.active_screen()
        if screen is not None and hasattr(screen, message.handler_name):
            screen.post_message(message)

    def active_screen(self) -> Any:
        """The screen on top, or None while there is none (starting up, shutting down)."""
        return self.screen_stack[-1] if self.screen_stack else None

    def _update_title(self) -> None:
        status = self.engine_status
        if status is not None:
            self.sub_title = f"{status.profile or self.profile_for_start()} · {status.state}" + (
                " · read-only" if self.read_only else ""
            )

    def _rearm_status(self) -> None:
        """Poll at the refresh rate while something changes; every STEADY_POLLS refreshes while steady (the
        sampler's snapshots carry the engine's state in between, and a change they show polls at once)."""
        if self.poll_status and self.is_running:
            steady = self.engine_state in ("ready", "stopped") and not self.busy and self.services.sampler is not None
            self._status_timer = self.set_timer(
                self.settings.refresh_s * (STEADY_POLLS if steady else 1), self.poll_engine
            )

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
        elif worker.group == "jobs" and event.state in (WorkerState.SUCCESS, WorkerState.ERROR):
            if event.state == WorkerState.ERROR:
                self.notify(f"jobs: {_reason(worker.error)}", severity="error", timeout=4)
            self._rearm_jobs()
        elif worker.group in ("experiment", "replay", "exp-lists") and event.state == WorkerState.ERROR:
            self.notify(_reason(worker.error), title=worker.group, severity="error", timeout=12)
        elif worker.group == "engine-action" and event.state == WorkerState.ERROR:
            self.busy = ""
            self.notify(_reason(worker.error), title=f"{worker.name} failed", severity="error", timeout=12)
            self.refresh_status_now()

    # -- app actions -------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.read_only and action in MUTATING:
            return None  # shown greyed out in the footer; the key does nothing
        return True

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
            sections.append(
                (
                    f"{getattr(self.screen, 'TITLE', None) or type(self.screen).__name__}",
                    rows([b for b in screen_bindings if isinstance(b, Binding)]),
                )
            )
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

    def action_quit(self) -> None:
        """Quit; the engine and every job go on (jobs run in their own sessions), so nothing is asked."""
        self.exit()


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
    app = FrankApp(
        services,
        settings=settings,
        theme=theme,
        read_only=bool(getattr(args, "read_only", False)),
        remember_theme=not os.environ.get("NO_COLOR"),
    )
    app.startup_notes = [*problems, *([theme_problem] if theme_problem else [])]
    if getattr(args, "theme", None) and not theme_problem:
        settings = config.Settings(**{**settings.__dict__, "theme": theme})
        try:
            config.save(settings)  # a theme chosen by flag is remembered too
        except OSError:
            pass
    app.run()
    return 0
