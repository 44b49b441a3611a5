"""Episodes: a menu of task suites (launch a draw against the running engine), the live episode of the
followed run (task, turn, last tool call, elapsed time, outcome per episode) and every run with its totals.

A run launched here is a detached job (frank.episodes.job): quitting the console never stops it, and a
new console lists it and follows it. The screen only renders frank.episodes.runner.load_state(), read
from the run's own files by one thread worker re-armed after each poll (once a second while a run is
followed and running).
"""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Header, Input, Label, Static

from frank.console.screens.base import FrankScreen
from frank.console.widgets.base import update_text
from frank.console.widgets.footer import FrankFooter

POLL_S = 1.0
OUTCOME_STYLE = {"pass": "bold green", "error": "bold red", "running": "bold"}  # table cells: plain Rich styles


class EpisodesScreen(FrankScreen):
    TITLE = "episodes"
    DEFAULT_CSS = """
    #ep-body { height: 1fr; }
    #ep-left { width: 2fr; }
    #ep-right { width: 3fr; }
    #ep-options { height: 3; }
    #ep-options Input { width: 10; }
    #ep-suites, #ep-runs { height: auto; max-height: 12; }
    """
    followed: str | None = None  # the run shown on the right
    state: Any = None  # its latest EpisodesState (None until the first poll)
    BINDINGS = [
        Binding("L", "launch", "launch", id="episodes.launch"),
        Binding("o", "follow", "follow", id="episodes.follow"),
        Binding("f5", "reload", "reload", id="episodes.reload", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield Header(icon="≡")
        with Horizontal(id="ep-body"):
            with Vertical(id="ep-left"):
                yield Static(
                    "[bold]suites[/]  [$frank-idle]L launches draws on the running engine[/]", classes="section"
                )
                yield DataTable(id="ep-suites", cursor_type="row")
                with Horizontal(id="ep-options"):
                    yield Label("draws")
                    yield Input("1", id="ep-draws", type="integer")
                yield Static("[bold]runs[/]  [$frank-idle]o follows[/]", classes="section")
                yield DataTable(id="ep-runs", cursor_type="row")
            with Vertical(id="ep-right"):
                yield Static("[$frank-idle]no run followed: launch one (L) or pick a run (o)[/]", id="ep-head")
                yield DataTable(id="ep-episodes", cursor_type="none")
                yield Static("", id="ep-totals")
        yield FrankFooter()

    def on_mount(self) -> None:
        s = self.query_one("#ep-suites", DataTable)
        s.add_column("suite", key="suite")
        s.add_column("manifest", key="path")
        r = self.query_one("#ep-runs", DataTable)
        for key in ("run", "status", "done", "total_s", "passed"):
            r.add_column(key, key=key)
        e = self.query_one("#ep-episodes", DataTable)
        for key in ("draw", "task", "turn", "last_tool", "elapsed", "outcome"):
            e.add_column(key.replace("_", " "), key=key)
        self.action_reload()
        s.focus()
        self._poll()

    # -- lists ----------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="episodes-lists", exit_on_error=False)
    def action_reload(self) -> None:
        from frank.episodes.runner import list_runs
        from frank.episodes.suite import builtin_suites

        suites, runs = builtin_suites(), list_runs()
        self.app.call_from_thread(self._show_lists, suites, runs)

    def _show_lists(self, suites: dict, runs: list[dict[str, Any]]) -> None:
        s = self.query_one("#ep-suites", DataTable)
        for name, path in suites.items():
            if name not in s.rows:
                s.add_row(name, str(path.name), key=name)
        r = self.query_one("#ep-runs", DataTable)
        for run in reversed(runs):  # newest first
            cells = (
                run["run_id"],
                run["status"],
                f"{run['done']}/{run['planned']}",
                f"{run['total_s']:.2f}",
                str(run["passed"]),
            )
            if run["run_id"] in r.rows:
                for key, value in zip(("run", "status", "done", "total_s", "passed"), cells):
                    r.update_cell(run["run_id"], key, value)
            else:
                r.add_row(*cells, key=run["run_id"])
        if self.followed is None and runs:
            running = [x for x in runs if x["status"] == "running"]
            if running:
                self.followed = running[-1]["run_id"]

    # -- launch and follow --------------------------------------------------------------------------------
    def action_launch(self) -> None:
        if getattr(self.app, "read_only", False):
            self.app.notify("read-only console: launching is off", severity="warning")
            return
        table = self.query_one("#ep-suites", DataTable)
        if table.row_count == 0:
            return
        suite = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        raw = self.query_one("#ep-draws", Input).value.strip() or "1"
        if not raw.isdigit() or int(raw) < 1:
            self.app.notify("draws: a whole number, 1 or more", severity="error")
            return
        self._launch(suite, int(raw))

    @work(thread=True, exclusive=True, group="episodes-launch", exit_on_error=False)
    def _launch(self, suite: str, draws: int) -> None:
        from frank.episodes import job
        from frank.episodes.runner import create_run, engine_endpoint

        url = engine_endpoint(None)  # refuses (a notification) when no engine is ready
        folder = create_run(suite, draws)
        st = job.launch(folder, url)
        self.app.call_from_thread(self._launched, folder.name, st.pid)

    def _launched(self, run_id: str, pid: int | None) -> None:
        self.app.notify(f"episodes {run_id} started (pid {pid}); it goes on if this console quits", timeout=6)
        self.followed = run_id
        self.action_reload()

    def action_follow(self) -> None:
        table = self.query_one("#ep-runs", DataTable)
        if table.row_count:
            self.followed = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            self._poll()

    # -- the followed run -----------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="episodes-poll", exit_on_error=False)
    def _poll(self) -> None:
        from frank.episodes.runner import load_state

        state = None
        if self.followed is not None:
            try:
                state = load_state(self.followed)
            except Exception as exc:  # noqa: BLE001 -- a vanished run folder ends the follow, not the screen
                self.app.call_from_thread(self.app.notify, f"episodes: {exc}", severity="warning")
                self.followed = None
        self.app.call_from_thread(self._show_state, state)

    def _show_state(self, state: Any) -> None:
        self.state = state
        if state is not None:
            self.refresh_view()
        running = state is not None and state.status == "running"
        self.set_timer(POLL_S if running else 5 * POLL_S, self._poll)
        if state is not None and not running:
            self.action_reload()

    def refresh_view(self) -> None:
        state = self.state
        if state is None:
            return
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
                    table.update_cell(key, column, value)
            else:
                table.add_row(*cells.values(), key=key)
        totals = "  ".join(
            f"draw {d['draw']}: {d['total_s']:.2f} s, {d['passed']}/{d['episodes']} passed" for d in state.draws
        )
        update_text(self.query_one("#ep-totals", Static), totals)
