"""The operator console: one Textual app over the headless layers, composed of plain objects.

Data flow (DESIGN.md section 2; memray's live view, toolong's messages): one source per kind of data
(frank/console/sources/: telemetry, engine, jobs, experiments, episodes, campaign) owns a thread, reads its
headless layer, and posts its frozen view as a typed message (frank/console/messages.py) only when it
changed. The app keeps the newest of each in one frozen ConsoleState (frank/console/state.py) and, once per
batch of messages, asks the screen on top to render it; screens and widgets only render and poll nothing.
Idle, with nothing changing, the app does nothing but receive one telemetry message per sample.

Actions are plain objects by concern (frank/console/actions/: engine, jobs, experiments and fidelity,
episodes, campaign, logs) holding the app as a Host (frank/console/host.py); screens depend on that protocol
and on the state, never on this module. Anything long runs as a job (frank.jobs): replays, experiments,
episodes and fidelity outlive the console. Quitting never stops a job or the engine and asks nothing;
`quit_stop` stops the engine first (asking, and naming any job running on it).
"""

from __future__ import annotations

import argparse
import gc
import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from textual.app import App
from textual.binding import Binding
from textual.driver import Driver
from textual.worker import Worker, WorkerState

from frank.console import config, job_kinds, themes
from frank.console.actions.campaign import CampaignActions
from frank.console.actions.engine import EngineActions
from frank.console.actions.episodes import EpisodeActions
from frank.console.actions.experiments import ExperimentActions
from frank.console.actions.fleet import FleetActions
from frank.console.actions.jobs import JobActions
from frank.console.actions.logs import LogActions
from frank.console.commands import FrankCommands
from frank.console.log_index import LogIndex
from frank.console.messages import (
    CampaignRead,
    EngineRead,
    EpisodesRead,
    ExperimentsRead,
    FleetRead,
    JobsRead,
    LogRead,
    SourceFailed,
    TelemetrySampled,
)
from frank.console.screens.campaign import CampaignScreen
from frank.console.screens.confirm import ConfirmDialog
from frank.console.screens.dashboard import DashboardScreen
from frank.console.screens.episodes import EpisodesScreen
from frank.console.screens.experiments import ExperimentsScreen
from frank.console.screens.fleet import FleetScreen
from frank.console.screens.help import HelpScreen
from frank.console.screens.logs import LogsScreen
from frank.console.screens.replays import ReplaysScreen
from frank.console.services import Services, default_services
from frank.console.sources.base import Source
from frank.console.sources.campaign import CampaignSource
from frank.console.sources.engine import EngineSource
from frank.console.sources.episodes import EpisodesSource
from frank.console.sources.experiments import ExperimentsSource
from frank.console.sources.fleet import FleetSource
from frank.console.sources.jobs import JobsSource
from frank.console.sources.logs import LogSource
from frank.console.sources.telemetry import TelemetrySource
from frank.console.state import CampaignPart, ConsoleState, FollowedJob
from frank.engine.controller import EngineStatus
from frank.engine.records import ENGINE_STATES, RUNNING_STATES
from frank.errors import FrankError

__all__ = ["FrankApp", "Services", "default_services", "run_console"]

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
    "fidelity",
    "set_knob",
    "episodes_launch",
    "screen_design",
    "campaign_init",
    "campaign",
    "fleet_prometheus",
}
# Binding ids renamed since a user may have remapped them under [keymap]: the old id still works.
RENAMED_BINDINGS = {"frank.plugins.region_cache": "engine.region_cache"}
SCREENS = Binding.Group("screens", compact=True)


class FrankApp(App[None]):
    TITLE = "frank"
    CSS_PATH = "frank.tcss"
    COMMANDS = App.COMMANDS | {FrankCommands}
    ENABLE_COMMAND_PALETTE = True
    MODES = {
        "dashboard": DashboardScreen,
        "replays": ReplaysScreen,
        "experiments": ExperimentsScreen,
        "logs": LogsScreen,
        "campaign": CampaignScreen,
        "episodes": EpisodesScreen,
        "fleet": FleetScreen,
    }

    BINDINGS = [
        Binding("1", "switch_mode('dashboard')", "dashboard", id="mode.dashboard", group=SCREENS),
        Binding("2", "switch_mode('replays')", "replays", id="mode.replays", group=SCREENS),
        Binding("3", "switch_mode('experiments')", "experiments", id="mode.experiments", group=SCREENS),
        Binding("4", "switch_mode('logs')", "logs", id="mode.logs", group=SCREENS),
        Binding("5", "switch_mode('campaign')", "campaign", id="mode.campaign", group=SCREENS),
        Binding("6", "switch_mode('episodes')", "episodes", id="mode.episodes", group=SCREENS),
        Binding("7", "switch_mode('fleet')", "fleet", id="mode.fleet", group=SCREENS),
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

    def __init__(
        self,
        services: Services,
        *,
        settings: config.Settings | None = None,
        theme: str | None = None,
        read_only: bool = False,
        remember_theme: bool = True,
        poll_status: bool = True,
        state: ConsoleState | None = None,
        offer_start: bool = True,
    ) -> None:
        super().__init__()
        job_kinds.install()  # frank.jobs lists, follows and cancels runs of the kinds it is given
        self.services = services
        self.settings = settings or config.Settings()
        self.read_only = read_only
        self.remember_theme = remember_theme
        for t in themes.THEMES.values():
            self.register_theme(t)
        self.theme = themes.resolve(theme) or self.settings.theme
        self.state = state or ConsoleState()  # the newest view of every source (frank.console.state)
        self.startup_notes: list[str] = []
        # actions, by concern
        self.engine = EngineActions(self)
        self.jobs = JobActions(self)
        self.experiments = ExperimentActions(self, self.jobs)
        self.episodes = EpisodeActions(self)
        self.campaign = CampaignActions(self)
        self.fleet = FleetActions(self)
        self.logs = LogActions(self)
        # sources: the engine's is left out when a test hands the app a fixed engine status (poll_status=False)
        post = self.post_message
        self.engine_source = (
            EngineSource(
                post,
                services.controller,
                services.profile,
                self.settings.refresh_s,
                self.settings.log_tail_lines,
                telemetry=services.sampler is not None,
            )
            if poll_status
            else None
        )
        self.telemetry_source = TelemetrySource(post, services.sampler) if services.sampler is not None else None
        self.jobs_source = JobsSource(post)
        self.experiments_source = ExperimentsSource(post, self.settings.refresh_s)
        self.episodes_source = EpisodesSource(post)
        self.campaign_source = CampaignSource(post, read_only=read_only)
        self.log_source = LogSource(post, self.settings.refresh_s)
        self.fleet_source = FleetSource(post)
        self._note_log_path()
        self._render_due = False
        self._seen_engine_state: str | None = None
        self._heap_settled = False
        self._start_offered = not offer_start  # the first read of a stopped engine offers a start, once
        self._experiments_seen = False  # (not while an experiment runner owns the engine)
        self.keymap = {RENAMED_BINDINGS.get(k, k): v for k, v in self.settings.keymap.items()}
        if self.keymap:
            self.set_keymap(self.keymap)

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver, but on a Unix terminal one whose input thread sleeps while no key comes."""
        default = super().get_driver_class()
        if f"{default.__module__}.{default.__name__}" == "textual.drivers.linux_driver.LinuxDriver":
            from frank.console.driver import QuietLinuxDriver

            return QuietLinuxDriver
        return default

    @property
    def sources(self) -> list[Source[Any]]:
        found = [
            self.engine_source,
            self.telemetry_source,
            self.jobs_source,
            self.experiments_source,
            self.episodes_source,
            self.campaign_source,
            self.log_source,
            self.fleet_source,
        ]
        return [s for s in found if s is not None]

    # -- conveniences over the state (benchmarks and tests read these) ---------------------------------
    @property
    def engine_status(self) -> EngineStatus | None:
        return self.state.engine.status

    @property
    def engine_state(self) -> str:
        return self.state.engine.state

    @property
    def job(self) -> FollowedJob | None:
        return self.state.jobs.followed

    @property
    def busy(self) -> str:
        return self.state.busy

    # -- life cycle ------------------------------------------------------------------------------
    def on_mount(self) -> None:
        if self.services.sampler is not None:
            try:
                self.services.sampler.start()
            except Exception as exc:  # noqa: BLE001 -- telemetry is a view; the console still controls the engine
                self.notify(f"telemetry did not start: {exc}", severity="error")
        self._update_title()
        self.switch_mode("dashboard")
        for note in self.startup_notes:
            self.notify(note, severity="warning", timeout=10)
        for source in self.sources:
            source.start()

    def on_unmount(self) -> None:
        if self._heap_settled:
            gc.unfreeze()  # what the app held goes back to the collector (tests run many apps in one process)
        for source in self.sources:  # daemon threads: a read in flight ends on its own, its post is dropped
            source.stop(timeout=0.2)
        if self.services.sampler is not None:
            self.services.sampler.stop(timeout=2.0)

    def switch_mode(self, mode: str) -> Any:
        """Switch screens, and tell the sources which of them a screen now looks at (they read faster)."""
        result = super().switch_mode(mode)
        self.log_source.want(mode == "logs")
        self.jobs_source.want(mode == "replays")
        self.episodes_source.want(mode == "episodes")
        self.experiments_source.want(mode == "experiments")
        self.campaign_source.want(mode == "campaign")
        self.fleet_source.want(mode == "fleet")
        return result

    # -- the one data path: a source's message -> state -> the screen on top ----------------------------
    def apply(self, **views: Any) -> None:
        """Replace parts of the state and render it once the messages waiting now are handled."""
        self.state = replace(self.state, **views)
        if not self._render_due:
            self._render_due = True
            self.call_next(self._render)

    def _render(self) -> None:
        self._render_due = False
        screen = self.screen_stack[-1] if self.screen_stack else None
        render = getattr(screen, "render_state", None)
        if render is not None and screen is not None and screen.is_mounted:
            with self.batch_update():
                render(self.state)

    def on_telemetry_sampled(self, message: TelemetrySampled) -> None:
        self.apply(telemetry=message.view)
        if not self._heap_settled:  # started: the screen is up and the first sample drawn
            self._heap_settled = True
            self.call_after_refresh(settle_heap)
        snap = message.view.snapshot
        # The sampler reads the controller's state every sample: a change it sees asks for a status read now
        # (while steady, the engine source reads only every few refreshes).
        seen = snap.engine.state if snap is not None else None
        if seen != self._seen_engine_state:
            if self._seen_engine_state is not None and seen in ENGINE_STATES and seen != self.engine_state:
                self.refresh_engine()
            self._seen_engine_state = seen

    def on_engine_read(self, message: EngineRead) -> None:
        self.apply(engine=message.view)
        self._update_title()
        self._note_log_path()
        self._maybe_offer_start()

    def _maybe_offer_start(self) -> None:
        """Once the first engine and experiments reads are in: a stopped engine, the dashboard still on top
        (the user has not gone elsewhere) and no experiment runner owning the engine: offer the start."""
        if self._start_offered or self.state.engine.status is None or not self._experiments_seen:
            return
        self._start_offered = True
        followed = self.state.experiments.followed
        runner = followed is not None and followed.state is not None and followed.state.status == "running"
        on_dashboard = isinstance(self.screen, DashboardScreen)
        if self.state.engine.state == "stopped" and on_dashboard and not (self.read_only or self.state.busy or runner):
            self.offer_start()

    def offer_start(self) -> None:
        """A console opened on a stopped engine says what starting it means and offers it (the next step)."""
        from frank.console.widgets.engine_panel import expected_start

        reading = self.state.engine
        hint = reading.start
        what = f" ({hint.description})" if hint is not None and hint.description else ""
        body = (
            f"The engine is stopped. Start the profile {reading.profile}{what}?\n"
            f"{upper_first(expected_start(hint))}.\n\n"
            "Later: s starts it and x stops it. Quitting this console (q) leaves it running."
        )
        self.push_screen(
            ConfirmDialog("Start the engine?", body, yes="Start", no="Not now", default_yes=True),
            lambda ok: self.engine.start() if ok else None,
        )

    def _note_log_path(self) -> None:
        status = self.state.engine.status
        path = status.log_path if status is not None and status.log_path else str(self.services.controller.log_path())
        if path != self.log_source.path:
            self.log_source.path = path
            self.log_source.poll_now()

    def on_log_read(self, message: LogRead) -> None:
        self.apply(log=message.view)

    def on_jobs_read(self, message: JobsRead) -> None:
        old, new = self.state.jobs.followed, message.view.followed
        self.apply(jobs=message.view)
        if new is not None and new.adopted and (old is None or old.run_id != new.run_id):
            self.notify(f"following the running job {new.run_id}", timeout=6)
        if old is not None and new is not None and old.run_id == new.run_id and old.running and not new.running:
            st = new.status
            if st is not None:
                self.notify(f"{st.kind} {new.run_id}: {st.state} ({st.done}/{st.planned or '?'})", timeout=8)

    def on_experiments_read(self, message: ExperimentsRead) -> None:
        old, new = self.state.experiments.followed, message.view.followed
        self.apply(experiments=message.view)
        self._experiments_seen = True
        self._maybe_offer_start()
        if new is not None and new.state is None:
            self.notify(f"experiment: {new.error or 'unreadable'}", severity="error")
        elif new is not None and old is None and new.state is not None and new.state.status == "running":
            self.notify(f"following the running experiment {new.run_id}", timeout=6)

    def on_fleet_read(self, message: FleetRead) -> None:
        self.apply(fleet=message.view)

    def on_episodes_read(self, message: EpisodesRead) -> None:
        self.apply(episodes=message.view)

    def on_campaign_read(self, message: CampaignRead) -> None:
        old = self.state.campaign
        self.apply(campaign=message.view)
        if message.view.fired and message.view.read != old.read:
            for line in message.view.fired:
                self.notify(line, title="revert rule fired", severity="error", timeout=30)

    def on_source_failed(self, message: SourceFailed) -> None:
        self.notify(message.error, title=message.source, severity="error", timeout=8)

    def _update_title(self) -> None:
        status = self.state.engine.status
        if status is not None:
            self.sub_title = f"{status.profile or self.state.engine.profile} · {status.state}" + (
                " · read-only" if self.read_only else ""
            )

    # -- what screens and actions ask (frank.console.host.Host) ----------------------------------------
    def set_busy(self, busy: str) -> None:
        self.apply(busy=busy)

    def guard(self, what: str) -> bool:
        """False (with a notification) when the console may not act now."""
        if self.read_only:
            self.notify(f"read-only console: {what} is disabled", severity="warning")
            return False
        if self.state.busy:
            self.notify(f"wait: the engine is {self.state.busy}", severity="warning")
            return False
        return True

    def refresh_engine(self) -> None:
        if self.engine_source is not None:
            self.engine_source.poll_now()

    def follow_job(self, run_id: str) -> None:
        self.jobs_source.follow(run_id)

    def reload_jobs(self) -> None:
        self.jobs_source.reload()

    def follow_run(self, run_id: str | None) -> None:
        followed = self.state.experiments.followed
        if followed is None or followed.run_id != run_id:
            self.experiments_source.follow(run_id)

    def reload_experiments(self) -> None:
        self.experiments_source.reload()

    def follow_episodes(self, run_id: str) -> None:
        self.episodes_source.follow(run_id)

    def launch_episodes(self, suite: str | None) -> None:
        self.episodes.launch(suite)

    def read_campaign(self) -> None:
        self.campaign_source.want(True)
        self.campaign_source.poll_now()

    def campaign_action(self, call: str, part: CampaignPart | None) -> None:
        self.campaign.act(call, part)

    def search_log(
        self, index: LogIndex, pattern: str, start: int, backwards: bool, then: Callable[[int | None], None]
    ) -> None:
        self.logs.search(index, pattern, start, backwards, then)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A failed action is a notification with its reason, never a traceback."""
        worker = event.worker
        if event.state != WorkerState.ERROR:
            return
        if worker.group == "engine-action":
            self.set_busy("")
            self.notify(_reason(worker.error), title=f"{worker.name} failed", severity="error", timeout=12)
            self.refresh_engine()
        else:
            self.notify(_reason(worker.error), title=worker.group, severity="error", timeout=12)

    # -- app actions (keys and the palette name them) ----------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.read_only and action in MUTATING:
            return None  # shown greyed out in the footer; the key does nothing
        return True

    def action_engine_start(self) -> None:
        self.engine.start()

    def action_engine_stop(self) -> None:
        self.engine.stop()

    def action_engine_restart(self) -> None:
        self.engine.restart()

    def action_toggle_region_cache(self) -> None:
        self.engine.toggle_region_cache()

    def action_knobs(self) -> None:
        self.engine.knobs()

    def set_knob(self, name: str, value: Any) -> None:
        self.engine.set_knob(name, value)

    def action_quit_stop(self) -> None:
        self.engine.quit_stop()

    def action_replay_launch(self) -> None:
        self.jobs.replay_launch()

    def action_replay_cancel(self) -> None:
        self.jobs.replay_cancel()

    def action_experiment_register(self) -> None:
        self.experiments.register()

    def action_experiment_run(self) -> None:
        self.experiments.run()

    def action_experiment_stop(self) -> None:
        self.experiments.stop()

    def action_fidelity(self) -> None:
        self.experiments.fidelity()

    def action_experiment_report(self) -> None:
        self.experiments.report()

    def action_screen_design(self) -> None:
        self.experiments.screen_design()

    def action_campaign_init(self, example: str | None = None) -> None:
        self.campaign.init(example)

    def action_campaign(self, call: str) -> None:
        """The palette's campaign actions: on the selected part of the campaign screen (5)."""
        from frank.console.screens.campaign import CampaignScreen

        if call == "watch":
            self.switch_mode("campaign")
            self.read_campaign()
            return
        screen = self.screen
        if isinstance(screen, CampaignScreen):
            self.campaign.act(call, screen.selected_part())
        else:
            self.switch_mode("campaign")
            self.notify(f"select a part, then {call} it (A adopt · S serve · V revert)", timeout=6)

    def action_fleet_prometheus(self) -> None:
        self.fleet.prometheus()

    def action_episodes_launch(self) -> None:
        self.switch_mode("episodes")
        self.episodes.launch(None)

    def confirm(self, title: str, body: str, then: Callable[[], Any], yes: str = "Yes") -> None:
        self.push_screen(ConfirmDialog(title, body, yes=yes), lambda ok: then() if ok else None)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.key_sections(), str(config.config_path()), self.get_key_display))

    def key_sections(self) -> list[tuple[str, list[tuple[str, str, str]]]]:
        """(title, [(key, description, binding id)]) for the app and the active screen, from the bindings."""

        def rows(bindings: Iterable[Binding]) -> list[tuple[str, str, str]]:
            return [(self._keymap_key(b), b.description or b.action, b.id or "") for b in bindings]

        sections = [("everywhere", rows([b for b in self.BINDINGS if isinstance(b, Binding)]))]
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
        return self.keymap.get(b.id or "", b.key)

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
                config.remember_theme(resolved, self.settings)  # its own state file: console.toml is never written
            except OSError as exc:
                self.notify(f"could not remember the theme: {exc}", severity="warning")

    # Textual's own action_quit is a coroutine; a plain method is an action as well (Textual awaits what it
    # returns only when that is awaitable).
    def action_quit(self) -> None:  # type: ignore[override]
        """Quit; the engine and every job go on (jobs run in their own sessions), so nothing is asked; what
        goes on is said once the terminal is back."""
        self.exit(message=quit_message(self.state) or None)


def upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def quit_message(state: ConsoleState) -> str:
    """What keeps running after the console quits, and how to stop it ("" when nothing does)."""
    lines = []
    status = state.engine.status
    if status is not None and status.state in RUNNING_STATES:
        where = ", ".join(x for x in (status.profile, f"pid {status.pid}" if status.pid else "", status.url) if x)
        lines.append(
            f"frank: the engine keeps running ({where}). Stop it with `frank engine stop`, "
            "or Q in the console (`frank` adopts it)."
        )
    for job in state.jobs.running:
        lines.append(f"frank: {job.kind} {job.run_id} keeps running; `frank jobs cancel {job.run_id}` stops it.")
    return "\n".join(lines)


def settle_heap() -> None:
    """Collect, then leave everything alive now (Textual's DOM, the screens, every imported module) out of
    the collector's scans (gc.freeze). Otherwise each full collection walks all of it, about 40 ms every
    minute or two at one sample a second: the largest single cost of the idle console after the repaint.
    New objects are collected as before."""
    gc.collect()
    gc.freeze()


def _reason(error: BaseException | None) -> str:
    if error is None:
        return "unknown error"
    if isinstance(error, FrankError):
        return str(error)
    return f"{type(error).__name__}: {error}"


def run_console(args: argparse.Namespace) -> int:
    settings, problems = config.load()
    remember = not os.environ.get("NO_COLOR")
    theme, theme_problem = config.startup_theme(getattr(args, "theme", None), settings, remember)
    services = default_services(getattr(args, "profile", None), settings.refresh_s)
    app = FrankApp(
        services,
        settings=settings,
        theme=theme,
        read_only=bool(getattr(args, "read_only", False)),
        remember_theme=remember,
    )
    app.startup_notes = [*problems, *([theme_problem] if theme_problem else [])]
    app.run()
    return 0
