"""Episodes: a menu of task suites (launch a draw against the running engine), the live episode of the
followed run (task, turn, last tool call, elapsed time, outcome per episode) and every run with its totals.

L asks for the suite and the number of draws (frank.console.screens.launch_episodes) and launches a
detached job (frank.episodes.job): quitting the console never stops it, and a new console lists it and
follows it. The screen renders the episodes source's view (frank.episodes.runner.load_state() of the
followed run, read once a second while it runs).
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Header, Static

from frank.console.screens.base import FrankScreen
from frank.console.state import ConsoleState, EpisodesView
from frank.console.widgets.base import update_text
from frank.console.widgets.footer import FrankFooter
from frank.episodes.runner import EpisodesState

RUN_COLUMNS = (("status", "state"), ("done", "done"), ("total_s", "total"), ("passed", "passed"), ("run", "run"))
OUTCOME_STYLE = {"pass": "bold green", "error": "bold red", "running": "bold"}  # table cells: plain Rich styles


class EpisodesScreen(FrankScreen):
    TITLE = "episodes"
    DEFAULT_CSS = """
    #ep-body { height: 1fr; }
    #ep-left { width: 1fr; }
    #ep-right { width: 1fr; padding: 0 1; }
    #ep-left .section { height: 1; padding: 0 1; margin-top: 1; }
    #ep-suites, #ep-runs { height: auto; max-height: 12; }
    #ep-head { height: auto; }
    EpisodesScreen.-narrow #ep-body { layout: vertical; }
    EpisodesScreen.-narrow #ep-left, EpisodesScreen.-narrow #ep-right { width: 1fr; height: 1fr; }
    EpisodesScreen.-narrow #ep-left .section { margin-top: 0; }
    EpisodesScreen.-narrow #ep-suites, EpisodesScreen.-narrow #ep-runs { max-height: 4; }
    """
    BINDINGS = [
        Binding("L", "launch", "launch", id="episodes.launch"),
        Binding("o", "follow", "follow", id="episodes.follow"),
    ]

    def compose(self) -> ComposeResult:
        yield Header(icon="≡")
        with Horizontal(id="ep-body"):
            with Vertical(id="ep-left"):
                yield Static(
                    "[bold]suites[/]  [$frank-idle]L asks for the suite and draws, then launches[/]", classes="section"
                )
                yield DataTable(id="ep-suites", cursor_type="row")
                yield Static("[bold]runs[/]  [$frank-idle]o follows[/]", classes="section")
                yield DataTable(id="ep-runs", cursor_type="row")
            with Vertical(id="ep-right"):
                yield Static("[$frank-idle]no run followed: launch one (L) or pick a run (o)[/]", id="ep-head")
                yield DataTable(id="ep-episodes", cursor_type="none")
                yield Static("", id="ep-totals")
        yield FrankFooter()

    @property
    def state(self) -> EpisodesState | None:
        """The followed run's live state (None until the source read one)."""
        return self.host.state.episodes.followed

    @property
    def followed(self) -> str | None:
        state = self.state
        return state.run_id if state is not None else None

    def on_mount(self) -> None:
        self._seen: EpisodesView | None = None
        s = self.query_one("#ep-suites", DataTable)
        s.add_column("suite", key="suite")
        s.add_column("tasks", key="tasks")
        s.add_column("manifest", key="path")
        r = self.query_one("#ep-runs", DataTable)
        for key, label in RUN_COLUMNS:  # the figures first: a narrow pane cuts the run id, never them
            r.add_column(label, key=key)
        e = self.query_one("#ep-episodes", DataTable)
        for key in ("draw", "task", "turn", "last_tool", "elapsed", "outcome"):
            e.add_column(key.replace("_", " "), key=key)
        s.focus()
        self.render_state(self.host.state)

    def render_state(self, state: ConsoleState) -> None:
        view = state.episodes
        if view is self._seen:
            return
        self._seen = view
        s = self.query_one("#ep-suites", DataTable)
        for suite in view.suites:
            if suite.name not in s.rows:
                s.add_row(suite.name, str(suite.tasks), suite.file, key=suite.name)
        r = self.query_one("#ep-runs", DataTable)
        for run in reversed(view.runs):  # newest first
            cells = (run.status, f"{run.done}/{run.planned}", f"{run.total_s:.1f} s", str(run.passed), run.run_id)
            if run.run_id in r.rows:
                for (key, _), value in zip(RUN_COLUMNS, cells, strict=True):
                    r.update_cell(run.run_id, key, value, update_width=True)
            else:
                r.add_row(*cells, key=run.run_id)
        if view.followed is not None:
            self._show_run(view.followed)

    # -- launch and follow --------------------------------------------------------------------------------
    def selected_suite(self) -> str | None:
        table = self.query_one("#ep-suites", DataTable)
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "launch" and self.host.read_only:
            return None  # greyed out in the footer (the launch refuses anyway)
        return True

    def action_launch(self) -> None:
        self.host.launch_episodes(self.selected_suite())

    def action_follow(self) -> None:
        table = self.query_one("#ep-runs", DataTable)
        if table.row_count:
            run_id = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            self.host.follow_episodes(str(run_id))  # rows are keyed by run id

    # -- the followed run -----------------------------------------------------------------------------------
    def _show_run(self, state: EpisodesState) -> None:
        update_text(
            self.query_one("#ep-head", Static),
            f"[bold]{state.run_id}[/]  {state.suite}  {state.status}  {state.done}/{state.planned} episodes"
            + (f"  [$frank-bad]{state.reason}[/]" if state.reason else ""),
        )
        table = self.query_one("#ep-episodes", DataTable)
        now = time.time()
        for ep in state.episodes:
            key = f"d{ep.draw}-{ep.task}"
            elapsed = ep.client_s if ep.outcome is not None else now - ep.started_at
            outcome = "running" if ep.outcome is None else ep.outcome
            cells = {
                "draw": str(ep.draw),
                "task": ep.task,
                "turn": str(ep.turn),
                "last_tool": ep.last_tool or "-",
                "elapsed": f"{elapsed or 0:.1f} s",
                "outcome": Text(outcome, style=OUTCOME_STYLE.get(outcome, "")),
            }
            if key in table.rows:
                for column, value in cells.items():
                    table.update_cell(key, column, value, update_width=True)
            else:
                table.add_row(*cells.values(), key=key)
        totals = "  ".join(
            f"draw {d['draw']}: total {d['total_s']:.2f} s, {d['passed']}/{d['episodes']} passed" for d in state.draws
        )
        update_text(self.query_one("#ep-totals", Static), totals)
