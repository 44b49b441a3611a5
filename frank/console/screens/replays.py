"""Replays: a menu of workloads (frank.workloads.catalog: the synthetic W01 at both scales, the user's recordings),
draws and mode; every run as a job (frank.jobs), running ones first; the followed job's per-draw progress
bars, live per-request table (updated by row key) and draw totals.

A replay launched here runs detached (frank.workloads.replay_job): quitting the console or an SSH drop never stops
it, and a new console finds it in the jobs table and follows it. The screen renders the jobs source's view
(frank.console.state.JobsView): the jobs, the workloads and the followed job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.widgets import DataTable, Header, Input, Label, ProgressBar, Select, Static

from frank.console.screens.base import FrankScreen
from frank.console.screens.jobs_text import job_title, totals_text
from frank.console.state import ConsoleState, JobsView
from frank.console.widgets.base import update_text
from frank.console.widgets.fmt import secs
from frank.console.widgets.footer import FrankFooter

if TYPE_CHECKING:
    from frank.workloads.replay import ReplayOptions

STATE_STYLE = {"running": "$frank-ok", "finished": "$frank-idle", "failed": "$frank-bad", "interrupted": "$frank-bad"}


class ReplaysScreen(FrankScreen):
    TITLE = "replays"
    BINDINGS = [
        Binding("L", "app.replay_launch", "launch", id="replays.launch"),
        Binding("C", "app.replay_cancel", "cancel", id="replays.cancel"),
        Binding("o", "open_run", "follow", id="replays.open", show=False),
        Binding("f5", "reload", "reload lists", id="replays.reload", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield Header(icon="≡")
        with Horizontal(id="rep-body"):
            with Vertical(id="rep-left"):
                yield Static("[bold]workloads[/]  [$frank-idle]enter or L launches[/]", classes="section")
                yield DataTable(id="workloads", cursor_type="row")
                with Horizontal(id="rep-options"):
                    yield Label("draws")
                    yield Input("all", id="rep-draws", tooltip="all, or draw names: draw-1,draw-2")
                    yield Label("limit")
                    yield Input(
                        "", id="rep-limit", placeholder="all", type="integer", tooltip="requests per draw (blank: all)"
                    )
                    # Decoding first: it is what the dashboard's verify-step and acceptance lines watch. The
                    # front-end mode (one output token) times the path before the engine and has no verify step.
                    # Each named as the CLI's --mode and the run strip name it, with what it does beside.
                    yield Select(
                        [("full · decode", "full"), ("engine · front end", "engine")],
                        value="full",
                        allow_blank=False,
                        id="rep-mode",
                        tooltip="full: the recorded requests decoded, streamed (verify steps, acceptance); "
                        "engine: one output token a request, timing the front end (no verify step)",
                    )
                yield Static("[bold]jobs[/]  [$frank-idle]running first · o follows[/]", classes="section")
                yield DataTable(id="rep-runs", cursor_type="row")
            with Vertical(id="rep-right"):
                yield Static("[$frank-idle]no job followed: launch a replay or pick a job (o)[/]", id="rep-head")
                yield VerticalScroll(id="rep-bars")
                yield DataTable(id="rep-requests", cursor_type="none")
                yield Static("", id="rep-totals")
        yield FrankFooter()

    def on_mount(self) -> None:
        w = self.query_one("#workloads", DataTable)
        w.add_column("workload", key="name")
        w.add_column("draws", key="draws")
        w.add_column("source", key="source")
        r = self.query_one("#rep-runs", DataTable)
        for key in ("run", "kind", "state", "done"):
            r.add_column(key, key=key)
        q = self.query_one("#rep-requests", DataTable)
        for key, label in (
            ("id", "request"),
            ("status", "status"),
            ("ttft", "TTFT"),
            ("queue", "queue"),
            ("prefill", "prefill"),
            ("front_end", "front-end"),
            ("tokens", "tokens"),
        ):
            q.add_column(label, key=key)
        self._bars: dict[str, ProgressBar] = {}
        self._job_seen: Any = None
        self._rows_drawn = 0  # the followed job's records already in the table
        self._job_run: str | None = None
        self._lists_seen: Any = None
        w.focus()
        self.render_state(self.host.state)

    def action_reload(self) -> None:
        self.host.reload_jobs()

    def _show_lists(self, view: JobsView) -> None:
        if (view.workloads, view.jobs) == self._lists_seen:
            return
        self._lists_seen = (view.workloads, view.jobs)
        w = self.query_one("#workloads", DataTable)
        for row in view.workloads:
            if row.name in w.rows:
                w.update_cell(row.name, "source", row.source)
            else:
                w.add_row(row.name, row.shape, row.source, key=row.name)
        r = self.query_one("#rep-runs", DataTable)
        for j in view.jobs:
            cells = (j.run_id, j.kind, j.state, f"{j.done}/{j.planned or '?'}")
            if j.run_id in r.rows:
                for col, value in zip(("run", "kind", "state", "done"), cells):
                    if r.get_cell(j.run_id, col) != value:
                        r.update_cell(j.run_id, col, value)
            else:
                r.add_row(*cells, key=j.run_id)

    # -- what the app's launch action reads ------------------------------------------------------
    def selected_workload(self) -> str | None:
        w = self.query_one("#workloads", DataTable)
        if w.row_count == 0:
            return None
        return w.coordinate_to_cell_key(w.cursor_coordinate).row_key.value

    def options(self) -> ReplayOptions:
        """The menu's choices as the replay's options (FrankError: a choice the replay refuses)."""
        from frank.workloads.replay import ReplayOptions

        draws = self.query_one("#rep-draws", Input).value.strip()
        limit = self.query_one("#rep-limit", Input).value.strip()
        return ReplayOptions(
            mode=str(self.query_one("#rep-mode", Select).value),
            draws=None if draws in ("", "all") else tuple(d.strip() for d in draws.split(",") if d.strip()),
            limit=int(limit) if limit else None,
        )

    async def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "workloads":
            await self.app.run_action("replay_launch")
        elif event.data_table.id == "rep-runs":
            self.action_open_run()

    def action_open_run(self) -> None:
        r = self.query_one("#rep-runs", DataTable)
        if r.row_count == 0:
            self.app.notify("no jobs yet", severity="warning")
            return
        self.host.follow_job(str(r.coordinate_to_cell_key(r.cursor_coordinate).row_key.value))  # keyed by run id

    # -- the followed job ------------------------------------------------------------------------
    def render_state(self, state: ConsoleState) -> None:
        self._show_lists(state.jobs)
        job = state.jobs.followed
        if job is None or job.status is None:
            return
        if job.run_id != self._job_run:  # another job is followed now: start its view afresh
            self.reset_job_view()
            self._job_run = job.run_id
        if job is self._job_seen:
            return
        self._job_seen = job
        st = job.status
        head = f"[{STATE_STYLE.get(st.state, '$frank-warn')}]● {escape(st.state)}[/] [bold]{escape(job_title(st))}[/]"
        head += f"\n[$frank-idle]{escape(st.run_id)}" + (f" · pid {st.pid}" if st.pid else "") + "[/]"
        if st.state not in ("running", "finished") and st.detail:
            head += f"\n[$frank-idle]{escape(st.detail)}[/]"
        update_text(self.query_one("#rep-head", Static), head)
        bars = self.query_one("#rep-bars", VerticalScroll)
        for draw, (done, total) in st.parts.items():
            bar = self._bars.get(draw)
            if bar is None:
                bar = ProgressBar(total=total, show_eta=False, id=f"bar-{len(self._bars)}")
                bar.border_title = f"draw {draw}"
                self._bars[draw] = bar
                bars.mount(Horizontal(Label(f"{draw} ", classes="bar-label"), bar, classes="bar-row"))
            bar.update(total=total, progress=done)
        table = self.query_one("#rep-requests", DataTable)
        fresh = min(len(job.records), job.received - self._rows_drawn)
        self._rows_drawn = job.received
        for rec in job.records[len(job.records) - fresh :]:  # only the records not drawn yet
            key = f"{rec.draw}/{rec.id}"
            cells = {
                "id": rec.id,
                "status": rec.status,
                "ttft": secs(rec.ttft_s),
                "queue": secs(rec.queue_s),
                "prefill": secs(rec.prefill_s),
                "front_end": secs(rec.front_end_s),
                "tokens": str(rec.prompt_tokens or "–"),
            }
            if key in table.rows:
                for col, value in cells.items():
                    if table.get_cell(key, col) != value:
                        table.update_cell(key, col, value)
            else:
                table.add_row(*cells.values(), key=key)
                table.move_cursor(row=table.row_count - 1)
        update_text(self.query_one("#rep-totals", Static), totals_text(st))

    def reset_job_view(self) -> None:
        self.query_one("#rep-requests", DataTable).clear()
        self.query_one("#rep-bars", VerticalScroll).remove_children()
        self._bars = {}
        self._job_seen = None
        self._rows_drawn = 0
