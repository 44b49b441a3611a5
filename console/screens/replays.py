"""Replays: a menu of workloads (the synthetic W01 at both scales, the user's recordings), draws and mode;
a launched replay shows per-draw progress bars, a live per-request table (updated by row key) and the draw
totals; finished runs are listed and can be opened.

The replay runs in a thread with its own event loop (ReplayJob), so the console's redraws never delay the
client timings. Progress arrives as frozen ReplayProgress objects from replays.runner; the screen draws
the newest one on the app's refresh tick.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.widgets import DataTable, Header, Input, Label, ProgressBar, Select, Static

from console.widgets.footer import FrankFooter
from console.screens.base import FrankScreen
from console.widgets.base import update_text
from console.widgets.fmt import secs
from engine import paths

BUILTIN = {"w01-mini": "mini", "w01-full": "full"}
REQUEST_ROWS = 200   # the live table keeps the newest rows; older ones stay in the run folder


class ReplayJob:
    """One replay started from the console: runs ReplayRunner in a thread, keeps the newest progress."""

    def __init__(self, runner: Any, title: str) -> None:
        self.runner = runner
        self.title = title
        self.progress: Any = None
        self.draws: dict[str, tuple[int, int]] = {}        # draw -> (done, total)
        self.totals: dict[str, Any] = {}                    # draw -> DrawTotals
        self.records: list[dict[str, Any]] = []             # the newest request records
        self.state = "starting"
        self.message = ""
        self.summary: dict[str, Any] | None = None
        self.version = 0
        self._thread = threading.Thread(target=self._run, name="frank-replay", daemon=True)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> "ReplayJob":
        self._thread.start()
        return self

    def cancel(self) -> None:
        self.runner.stop()

    def on_progress(self, p: Any) -> None:   # called on the replay thread: only store, never touch widgets
        self.progress = p
        if p.draw:
            self.draws[p.draw] = (p.done, p.total)
        if p.totals is not None and p.draw:
            self.totals[p.draw] = p.totals
        if p.last is not None:
            self.records = [*self.records[-(REQUEST_ROWS - 1):], dict(p.last)]
        if p.phase in ("started", "request", "result", "draw_done"):
            self.state = "running"
        if p.message:
            self.message = p.message
        self.version += 1

    def _run(self) -> None:
        try:
            self.summary = self.runner.run_sync()
            self.state = self.summary.get("state", "finished")
        except Exception as exc:  # shown on screen as the job's state; the run folder keeps the records
            self.state, self.message = "failed", f"{type(exc).__name__}: {exc}"
        self.version += 1

    def progress_tuple(self) -> tuple:
        done = sum(d for d, _ in self.draws.values())
        total = sum(t for _, t in self.draws.values()) or None
        p = self.progress
        draws = getattr(p, "draws", 0) or len(self.draws)
        now = f"draw {p.draw} ({p.draw_index}/{draws})" if p is not None and p.draw else ""
        fe = sum(t.front_end_s for t in self.totals.values())
        totals = f"{now}  front-end {secs(fe)}  failed {sum(t.failed for t in self.totals.values())}"
        if self.state not in ("running", "starting") and self.message and self.message != self.state:
            totals = self.message
        return (f"replay {self.title}", done, total, totals.strip(), self.state)


def list_workloads() -> list[tuple[str, str, str, str]]:
    """(key, name, draws, source) for the built-in W01 scales and each workload folder of the user."""
    from replays.workload import read_manifest

    out: list[tuple[str, str, str, str]] = []
    root = paths.workloads_dir()
    for name, scale in BUILTIN.items():
        made = (root / name / "workload.toml").is_file()
        out.append((f"builtin:{scale}", name, "draw-1..3 × 45", "synthetic W01" + ("" if made else " (made on first use)")))
    for manifest in sorted(root.glob("*/workload.toml")):
        if manifest.parent.name in BUILTIN:
            continue
        try:
            w = read_manifest(manifest.parent)
            names = ", ".join(f"{d.name}×{d.requests or '?'}" for d in w.draws[:3]) + ("…" if len(w.draws) > 3 else "")
            out.append((str(manifest.parent), w.name, names, "recording"))
        except Exception as exc:  # listed with its error; `frank workload check` names the line
            out.append((str(manifest.parent), manifest.parent.name, "–", f"error: {exc}"[:60]))
    return out


def list_runs() -> list[dict[str, Any]]:
    from replays.runner import SUMMARY_FILE, default_runs_root

    runs = []
    for folder in sorted(default_runs_root().iterdir(), reverse=True):
        try:
            runs.append(json.loads((folder / SUMMARY_FILE).read_text()))
        except (OSError, ValueError):
            continue
    return runs


def workload_path(key: str) -> Path:
    """The folder of a workload; a built-in W01 is generated into the workloads dir on first use."""
    if key.startswith("builtin:"):
        from replays.w01 import make_w01

        scale = key.split(":", 1)[1]
        out = paths.workloads_dir() / f"w01-{scale}"
        if not (out / "workload.toml").is_file():
            make_w01(out, scale=scale, seed=1)
        return out
    return Path(key)


class ReplaysScreen(FrankScreen):
    TITLE = "replays"
    BINDINGS = [
        Binding("L", "app.replay_launch", "launch", id="replays.launch"),
        Binding("C", "app.replay_cancel", "cancel", id="replays.cancel"),
        Binding("o", "open_run", "open", id="replays.open", show=False),
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
                    yield Input("", id="rep-limit", placeholder="all", type="integer",
                                tooltip="requests per draw (blank: all)")
                    yield Select([("engine mode", "engine"), ("full mode", "full")],
                                 value="engine", allow_blank=False, id="rep-mode")
                yield Static("[bold]finished runs[/]  [$frank-idle]o opens[/]", classes="section")
                yield DataTable(id="rep-runs", cursor_type="row")
            with Vertical(id="rep-right"):
                yield Static("[$frank-idle]no replay launched from this console yet[/]", id="rep-head")
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
        for key in ("run", "state", "ok", "front-end"):
            r.add_column(key, key=key)
        q = self.query_one("#rep-requests", DataTable)
        for key, label in (("id", "request"), ("status", "status"), ("ttft", "TTFT"),
                           ("queue", "queue"), ("prefill", "prefill"), ("front_end", "front-end"),
                           ("tokens", "tokens")):
            q.add_column(label, key=key)
        self._bars: dict[str, ProgressBar] = {}
        self._job_seen: Any = None
        self.action_reload()
        w.focus()
        self.refresh_view()

    @work(thread=True, exclusive=True, group="replay-lists", exit_on_error=False)
    def action_reload(self) -> None:
        workloads, runs = list_workloads(), list_runs()
        self.app.call_from_thread(self._show_lists, workloads, runs)

    def _show_lists(self, workloads: list[tuple[str, str, str, str]], runs: list[dict[str, Any]]) -> None:
        w = self.query_one("#workloads", DataTable)
        for key, name, draws, source in workloads:
            if key in w.rows:
                w.update_cell(key, "source", source)
            else:
                w.add_row(name, draws, source, key=key)
        r = self.query_one("#rep-runs", DataTable)
        for s in runs:
            rid = s["run_id"]
            t = s.get("totals") or {}
            cells = (rid, s.get("state", "?"), str(t.get("ok", "?")), secs(t.get("front_end_s")))
            if rid in r.rows:
                for col, value in zip(("run", "state", "ok", "front-end"), cells):
                    r.update_cell(rid, col, value)
            else:
                r.add_row(*cells, key=rid)

    # -- what the app's launch action reads ------------------------------------------------------
    def selected_workload(self) -> str | None:
        w = self.query_one("#workloads", DataTable)
        if w.row_count == 0:
            return None
        return w.coordinate_to_cell_key(w.cursor_coordinate).row_key.value

    def options(self) -> dict[str, Any]:
        draws = self.query_one("#rep-draws", Input).value.strip()
        limit = self.query_one("#rep-limit", Input).value.strip()
        return {"draws": None if draws in ("", "all") else tuple(d.strip() for d in draws.split(",") if d.strip()),
                "limit": int(limit) if limit else None,
                "mode": self.query_one("#rep-mode", Select).value}

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "workloads":
            self.app.action_replay_launch()  # type: ignore[attr-defined]
        elif event.data_table.id == "rep-runs":
            self.action_open_run()

    def action_open_run(self) -> None:
        r = self.query_one("#rep-runs", DataTable)
        if r.row_count == 0:
            self.app.notify("no finished runs yet", severity="warning")
            return
        rid = r.coordinate_to_cell_key(r.cursor_coordinate).row_key.value
        summary = next((s for s in list_runs() if s["run_id"] == rid), None)
        if summary is not None:
            update_text(self.query_one("#rep-head", Static),
                        f"[bold]run {escape(rid)}[/]  [$frank-idle]{escape(summary.get('run_dir', ''))}[/]")
            update_text(self.query_one("#rep-totals", Static), summary_text(summary))

    # -- the live job ----------------------------------------------------------------------------
    def refresh_view(self) -> None:
        app: Any = self.app
        job = app.replay
        if job is None:
            return
        key = (id(job), job.version)
        if key == self._job_seen:
            return
        self._job_seen = key
        style = {"running": "$frank-ok", "failed": "$frank-bad", "interrupted": "$frank-bad"}.get(job.state, "$frank-warn")
        head = f"[{style}]● {escape(job.state)}[/] [bold]{escape(job.title)}[/]"
        if job.message and job.message != job.state:
            head += f"\n[$frank-idle]{escape(job.message)}[/]"
        update_text(self.query_one("#rep-head", Static), head)
        bars = self.query_one("#rep-bars", VerticalScroll)
        for draw, (done, total) in job.draws.items():
            bar = self._bars.get(draw)
            if bar is None:
                bar = ProgressBar(total=total, show_eta=False, id=f"bar-{len(self._bars)}")
                bar.border_title = f"draw {draw}"
                self._bars[draw] = bar
                bars.mount(Horizontal(Label(f"{draw} ", classes="bar-label"), bar, classes="bar-row"))
            bar.update(total=total, progress=done)
        table = self.query_one("#rep-requests", DataTable)
        for rec in job.records[-REQUEST_ROWS:]:
            key = f"{rec.get('draw')}/{rec.get('id')}"
            server = rec.get("server") or {}
            cells = {"id": str(rec.get("id")), "status": rec.get("status", "?"),
                     "ttft": secs(server.get("ttft_s")), "queue": secs(server.get("queue_s")),
                     "prefill": secs(server.get("prefill_s")), "front_end": secs(server.get("front_end_s")),
                     "tokens": str(rec.get("prompt_tokens") or "–")}
            if key in table.rows:
                for col, value in cells.items():
                    if table.get_cell(key, col) != value:
                        table.update_cell(key, col, value)
            else:
                table.add_row(*cells.values(), key=key)
                table.move_cursor(row=table.row_count - 1)
        update_text(self.query_one("#rep-totals", Static), totals_text(job))
        if not job.running:
            self.action_reload()

    def reset_job_view(self) -> None:
        self.query_one("#rep-requests", DataTable).clear()
        self.query_one("#rep-bars", VerticalScroll).remove_children()
        self._bars = {}
        self._job_seen = None


def totals_text(job: ReplayJob) -> str:
    lines = []
    for draw, t in job.totals.items():
        lines.append(f"[bold]{escape(draw)}[/] {t.ok}/{t.planned} ok · {t.failed} failed · "
                     f"front-end {secs(t.front_end_s)} · prefill {secs(t.prefill_s)} · queue {secs(t.queue_s)} · "
                     f"TTFT {secs(t.ttft_s)}" + (f" · verify step {secs(t.verify_step_s)}" if t.verify_step_s else ""))
    return "\n".join(lines)


def summary_text(s: dict[str, Any]) -> str:
    lines = [f"[$frank-idle]state[/] {escape(str(s.get('state')))}  [$frank-idle]mode[/] {escape(str(s.get('mode')))}"
             + (f"  [$frank-bad]{escape(str(s['error']))}[/]" if s.get("error") else "")]
    for draw, t in (s.get("draws") or {}).items():
        lines.append(f"[bold]{escape(draw)}[/] {t.get('ok')}/{t.get('planned')} ok · {t.get('failed')} failed · "
                     f"front-end {secs(t.get('front_end_s'))} · prefill {secs(t.get('prefill_s'))} · "
                     f"queue {secs(t.get('queue_s'))} · TTFT {secs(t.get('ttft_s'))}")
    t = s.get("totals") or {}
    lines.append(f"[bold]total[/] {t.get('ok')} ok · front-end {secs(t.get('front_end_s'))} · "
                 f"TTFT {secs(t.get('ttft_s'))} · client {secs(t.get('client_total_s'))}")
    return "\n".join(lines)
