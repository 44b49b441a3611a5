"""Replays: a menu of workloads (frank.workloads.catalog: the synthetic W01 at both scales, the user's recordings),
draws and mode; every run as a job (frank.jobs), running ones first; the followed job's per-draw progress
bars, live per-request table (updated by row key) and draw totals.

A replay launched here runs detached (frank.workloads.replay_job): quitting the console or an SSH drop never stops
it, and a new console finds it in the jobs table and follows it. The screen reacts to the app's typed
messages: JobsListed (the running jobs), JobProgressed (the followed job's status and new records).
"""

from __future__ import annotations

from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.widgets import DataTable, Header, Input, Label, ProgressBar, Select, Static

from frank.console.messages import JobProgressed, JobsListed
from frank.console.screens.base import FrankScreen
from frank.console.services import FollowedJob
from frank.console.widgets.base import update_text
from frank.console.widgets.fmt import secs
from frank.console.widgets.footer import FrankFooter
from frank.jobs import JobStatus

STATE_STYLE = {"running": "$frank-ok", "finished": "$frank-idle", "failed": "$frank-bad", "interrupted": "$frank-bad"}


def workload_rows() -> list[tuple[str, str, str, str]]:
    """(key, name, draws × requests, source) from the one catalog, for the workloads table."""
    from frank.workloads.catalog import list_workloads

    rows = []
    for e in list_workloads():
        shape = f"{e.draws} × {e.requests // e.draws}" if e.draws and e.requests else "–"
        if e.error:
            rows.append((e.name, e.name, "–", f"error: {e.error}"[:60]))
        elif e.source == "builtin":
            rows.append((e.name, e.name, shape, "synthetic W01" + ("" if e.generated else " (made on first use)")))
        else:
            rows.append((e.name, e.name, shape, "recording"))
    return rows


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
                    yield Select(
                        [("engine mode", "engine"), ("full mode", "full")],
                        value="engine",
                        allow_blank=False,
                        id="rep-mode",
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
        self._running_seen: set[str] | None = None
        self.action_reload()
        w.focus()
        self.refresh_view()

    @work(thread=True, exclusive=True, group="replay-lists", exit_on_error=False)
    def action_reload(self) -> None:
        from frank import jobs

        workloads, runs = workload_rows(), jobs.list_jobs()
        self.app.call_from_thread(self._show_lists, workloads, runs)

    def _show_lists(self, workloads: list[tuple[str, str, str, str]], runs: list[JobStatus]) -> None:
        w = self.query_one("#workloads", DataTable)
        for key, name, draws, source in workloads:
            if key in w.rows:
                w.update_cell(key, "source", source)
            else:
                w.add_row(name, draws, source, key=key)
        self._show_jobs(sorted(runs, key=lambda j: (j.state != "running", j.run_id), reverse=False))

    def _show_jobs(self, runs: list[JobStatus]) -> None:
        r = self.query_one("#rep-runs", DataTable)
        for j in runs:
            cells = (j.run_id, j.kind, j.state, f"{j.done}/{j.planned or '?'}")
            if j.run_id in r.rows:
                for col, value in zip(("run", "kind", "state", "done"), cells):
                    if r.get_cell(j.run_id, col) != value:
                        r.update_cell(j.run_id, col, value)
            else:
                r.add_row(*cells, key=j.run_id)

    def on_jobs_listed(self, message: JobsListed) -> None:
        running = {j.run_id for j in message.running}
        if running != self._running_seen:
            self._running_seen = running
            self.action_reload()  # a job started or ended: its row's state changes
        else:
            self._show_jobs(message.running)

    def on_job_progressed(self, message: JobProgressed) -> None:
        self.refresh_view()

    # -- what the app's launch action reads ------------------------------------------------------
    def selected_workload(self) -> str | None:
        w = self.query_one("#workloads", DataTable)
        if w.row_count == 0:
            return None
        return w.coordinate_to_cell_key(w.cursor_coordinate).row_key.value

    def options(self) -> dict[str, Any]:
        draws = self.query_one("#rep-draws", Input).value.strip()
        limit = self.query_one("#rep-limit", Input).value.strip()
        return {
            "draws": None if draws in ("", "all") else tuple(d.strip() for d in draws.split(",") if d.strip()),
            "limit": int(limit) if limit else None,
            "mode": self.query_one("#rep-mode", Select).value,
        }

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "workloads":
            self.app.action_replay_launch()  # type: ignore[attr-defined]
        elif event.data_table.id == "rep-runs":
            self.action_open_run()

    def action_open_run(self) -> None:
        r = self.query_one("#rep-runs", DataTable)
        if r.row_count == 0:
            self.app.notify("no jobs yet", severity="warning")
            return
        self.frank.follow_job(r.coordinate_to_cell_key(r.cursor_coordinate).row_key.value)

    # -- the followed job ------------------------------------------------------------------------
    def refresh_view(self) -> None:
        job = self.frank.job
        if job is None or job.status is None:
            return
        if job.run_id != self._job_run:  # another job is followed now: start its view afresh
            self.reset_job_view()
            self._job_run = job.run_id
        key = (job.run_id, job.version)
        if key == self._job_seen:
            return
        self._job_seen = key
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
            if "draw" not in rec or "status" not in rec:
                continue  # not a request record (another kind's journal line)
            key = f"{rec.get('draw')}/{rec.get('id')}"
            server = rec.get("server") or {}
            cells = {
                "id": str(rec.get("id")),
                "status": rec.get("status", "?"),
                "ttft": secs(server.get("ttft_s")),
                "queue": secs(server.get("queue_s")),
                "prefill": secs(server.get("prefill_s")),
                "front_end": secs(server.get("front_end_s")),
                "tokens": str(rec.get("prompt_tokens") or "–"),
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


def job_title(st: JobStatus) -> str:
    extra = st.extra or {}
    if st.kind == "replay" and extra.get("workload"):
        return f"replay {extra['workload']} · {extra.get('mode')}"
    return st.kind


def totals_text(st: JobStatus) -> str:
    lines = []
    for draw, t in ((st.extra or {}).get("draws") or {}).items():
        lines.append(
            f"[bold]{escape(draw)}[/] {t.get('ok')}/{t.get('planned')} ok · {t.get('failed')} failed · "
            f"front-end {secs(t.get('front_end_s'))} · prefill {secs(t.get('prefill_s'))} · "
            f"queue {secs(t.get('queue_s'))} · TTFT {secs(t.get('ttft_s'))}"
            + (f" · verify step {secs(t['verify_step_s'])}" if t.get("verify_step_s") else "")
        )
    if not lines and st.detail:
        lines.append(escape(st.detail))
    return "\n".join(lines)


def job_progress(job: FollowedJob) -> tuple:
    """(title, done, total, totals, state) of the followed job, for the dashboard's progress strip."""
    st = job.status
    if st is None:
        return (f"job {job.run_id}", 0, None, "", "starting")
    now = next(
        (f"draw {d} ({i}/{len(st.parts)})" for i, (d, (done, total)) in enumerate(st.parts.items(), 1) if done < total),
        "",
    )
    draws = (st.extra or {}).get("draws") or {}
    fe = sum(t.get("front_end_s") or 0.0 for t in draws.values())
    failed = sum(t.get("failed") or 0 for t in draws.values())
    totals = f"{now}  front-end {secs(fe)}  failed {failed}" if st.kind == "replay" else st.detail
    return (job_title(st), st.done, st.planned, totals.strip(), st.state)
