"""Replays: a menu of workloads (frank.workloads.catalog: the synthetic W01 at both scales, the user's recordings),
draws and mode; every run as a job (frank.jobs), running ones first; the followed job's per-draw progress
bars, live per-request table (updated by row key) and draw totals.

A replay launched here runs detached (frank.workloads.replay_job): quitting the console or an SSH drop never stops
it, and a new console finds it in the jobs table and follows it. The screen renders the jobs source's view
(frank.console.state.JobsView): the jobs, the workloads and the followed job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.widgets import DataTable, Header, Input, Label, ProgressBar, Select, Static

from frank.console.screens.base import FrankScreen
from frank.console.screens.jobs_text import job_cells, job_title, totals_text
from frank.console.state import ConsoleState, JobRecord, JobsView
from frank.console.widgets.base import update_text
from frank.console.widgets.fmt import secs
from frank.console.widgets.footer import FrankFooter

if TYPE_CHECKING:
    from frank.workloads.replay import ReplayOptions

STATE_STYLE = {"running": "$frank-ok", "finished": "$frank-idle", "failed": "$frank-bad", "interrupted": "$frank-bad"}
JOB_COLUMNS = ("state", "done", "started", "job")  # the figures first: a narrow pane cuts the name, never them
# (key, label): the followed job's requests, one row each, newest last (help's legend says what each is)
REQUEST_COLUMNS = (
    ("id", "request"),
    ("ttft", "TTFT"),
    ("prefill", "prefill"),
    ("front_end", "front end"),
    ("tokens", "tokens"),
    ("cache", "cache"),
)
REQUESTS_TIP = (
    "one row a request, newest last; times are the server's for that request. TTFT: time to first token; "
    "prefill: computing the prompt; front end: TTFT - queue - prefill (tokenizing, the path before the engine); "
    "tokens: prompt tokens; cache: the region cache's state it was served with (→ it flipped before this "
    "request, ⇄ while it ran). ? shows the legend."
)


class ReplaysScreen(FrankScreen):
    TITLE = "replays"
    BINDINGS = [
        Binding("L", "app.replay_launch", "launch", id="replays.launch"),
        Binding("C", "app.replay_cancel", "cancel", id="replays.cancel"),
        Binding("o", "open_run", "follow", id="replays.open", show=False),
        Binding("m", "menu", "menu", id="replays.menu"),
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
                yield Static("[bold]jobs[/]  [$frank-idle]running first · o follows[/]", id="rep-jobs-label")
                yield DataTable(id="rep-runs", cursor_type="row")
            with Vertical(id="rep-right"):
                yield Static(
                    "[$frank-idle]no job followed: pick a workload and press enter (or L) to launch a replay, "
                    "or pick a job and press o[/]",
                    id="rep-head",
                )
                yield VerticalScroll(id="rep-bars")
                requests: DataTable[str | Text] = DataTable(id="rep-requests", cursor_type="none")
                requests.tooltip = REQUESTS_TIP
                yield requests
                with VerticalScroll(id="rep-totals-box"):
                    yield Static("", id="rep-totals")
        yield FrankFooter()

    def on_mount(self) -> None:
        w = self.query_one("#workloads", DataTable)
        w.add_column("workload", key="name")
        w.add_column("draws", key="draws")
        w.add_column("source", key="source")
        r = self.query_one("#rep-runs", DataTable)
        for key in JOB_COLUMNS:
            r.add_column(key, key=key)
        q = self.query_one("#rep-requests", DataTable)
        for key, label in REQUEST_COLUMNS:
            q.add_column(label, key=key)
        self._bars: dict[str, ProgressBar] = {}
        self._job_seen: Any = None
        self._rows_drawn = 0  # the followed job's records already in the table
        self._job_run: str | None = None
        self._lists_seen: Any = None
        self._menu = False  # narrow: the menu asked for (m) while a job is followed
        w.focus()
        self.render_state(self.host.state)

    # -- narrow: the menu or the followed job, one at a time (80x24 shows the job whole) ------------------
    def on_resize(self, event: events.Resize) -> None:
        super().on_resize(event)
        self._place()

    def _place(self) -> None:
        """Narrow with a job followed: the job alone (its state, 8+ requests, the draws), the menu on `m`."""
        followed = self.host.state.jobs.followed is not None
        narrow = self.has_class("-narrow")
        self.query_one("#rep-left").display = not (narrow and followed and not self._menu)
        self.query_one("#rep-right").display = not (narrow and self._menu) or not followed

    def action_menu(self) -> None:
        """Narrow: switch between the menu (workloads, options, jobs) and the followed job."""
        if not self.has_class("-narrow"):
            self.query_one("#workloads", DataTable).focus()
            return
        self._menu = not self._menu
        self._place()
        if self._menu or self.host.state.jobs.followed is None:
            self.query_one("#workloads", DataTable).focus()

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
            cells = job_cells(j)
            if j.run_id in r.rows:
                for col, value in zip(JOB_COLUMNS, cells, strict=True):
                    if r.get_cell(j.run_id, col) != value:
                        r.update_cell(j.run_id, col, value, update_width=True)  # 9/135 becomes 135/135 whole
            else:
                r.add_row(*cells, key=j.run_id)
        label = "[bold]jobs[/]  [$frank-idle]running first · o follows[/]"
        if not view.jobs:
            label = "[bold]jobs[/]  [$frank-idle]none yet: a replay launched above is listed here[/]"
        update_text(self.query_one("#rep-jobs-label", Static), label)

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
            self._menu = False
            self._place()
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
        following = table.scroll_y >= table.max_scroll_y  # at the newest row: keep following it
        added = False
        for rec in job.records[len(job.records) - fresh :]:  # only the records not drawn yet
            key = f"{rec.draw}/{rec.id}"
            cells = request_cells(rec)
            if key in table.rows:
                for col, value in cells.items():
                    if table.get_cell(key, col) != value:
                        table.update_cell(key, col, value, update_width=True)
            else:
                table.add_row(*cells.values(), key=key)
                added = True
        if added and following:  # unless the user scrolled up to read older rows
            table.call_after_refresh(table.scroll_end, animate=False)
        box = self.query_one("#rep-totals-box", VerticalScroll)
        at_end = box.scroll_y >= box.max_scroll_y  # the draw in progress last: follow it, unless scrolled
        update_text(self.query_one("#rep-totals", Static), totals_text(st))
        if at_end:
            box.call_after_refresh(box.scroll_end, animate=False)

    def reset_job_view(self) -> None:
        self.query_one("#rep-requests", DataTable).clear()
        self.query_one("#rep-bars", VerticalScroll).remove_children()
        self._bars = {}
        self._job_seen = None
        self._rows_drawn = 0


def request_cells(rec: JobRecord) -> dict[str, str | Text]:
    """One request's row: a failed one says so where its TTFT would be; `cache` is the region cache's state
    it was served with, marked where a live knob flipped (→ before it, ⇄ while it ran)."""
    flipped = "⇄" if any(f.during for f in rec.flips) else ("→" if rec.flips else "")
    cache = rec.knob("region_cache") or ("?" if rec.flips else "–")
    return {
        "id": rec.id,
        "ttft": secs(rec.ttft_s) if rec.status == "ok" else Text("failed", style="bold red"),
        "prefill": secs(rec.prefill_s),
        "front_end": secs(rec.front_end_s),
        "tokens": str(rec.prompt_tokens or "–"),
        "cache": Text(f"{flipped}{cache}", style="bold") if flipped else cache,
    }
