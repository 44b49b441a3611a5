"""Dashboard: engine, engine metrics, GPU, CPU pool, the current run and the engine log tail.

Wide terminals show every panel; below 110 columns or 30 rows the panels other than the engine's are
tabbed (m metrics, g gpu, p cpu pool, o log; or left/right on the tab bar) so nothing is cut off at 80x24.
`render_state` maps the app's state (the newest snapshot, status, followed job) to the panels' view objects:
the only place that knows the telemetry types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Header, Tab, Tabs

from frank.console.screens.base import NARROW_WIDTH, SHORT_HEIGHT, FrankScreen
from frank.console.screens.jobs_text import NO_PROGRESS, Progress, job_progress
from frank.console.state import ConsoleState
from frank.console.widgets.cpu_panel import CpuPanel, CpuView
from frank.console.widgets.engine_panel import EnginePanel
from frank.console.widgets.footer import FrankFooter
from frank.console.widgets.gpu_panel import GpuPanel, GpuView, rig_facts_text
from frank.console.widgets.log_tail import LogTail
from frank.console.widgets.metrics_panel import CpuDecodeView, MetricsPanel, MetricsView, RequestRow
from frank.console.widgets.progress import RunProgress

if TYPE_CHECKING:
    from frank.engine.metrics.rates import WindowRates
    from frank.telemetry.sampler import Snapshot

TABBED = ("metrics", "gpu", "cpu", "log")


class DashboardScreen(FrankScreen):
    TITLE = "dashboard"
    BINDINGS = [
        Binding("m", "panel('metrics')", "metrics", id="dashboard.metrics", show=False),
        Binding("g", "panel('gpu')", "gpu", id="dashboard.gpu", show=False),
        Binding("p", "panel('cpu')", "cpu", id="dashboard.cpu", show=False),
        Binding("o", "panel('log')", "log", id="dashboard.log", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield Header(icon="≡")
        # One flat container: a 2-column grid when wide, a column with a tab bar when narrow.
        with Vertical(id="dash"):
            yield EnginePanel(id="engine")
            yield Tabs(
                Tab("m metrics", id="tab-metrics"),
                Tab("g gpu", id="tab-gpu"),
                Tab("p cpu", id="tab-cpu"),
                Tab("o log", id="tab-log"),
                id="panel-tabs",
            )
            yield MetricsPanel(id="metrics", classes="tabbed")
            yield GpuPanel(id="gpu", classes="tabbed")
            yield CpuPanel(id="cpu", classes="tabbed")
            yield RunProgress(id="run")
            yield LogTail(id="log", classes="tabbed")
        yield FrankFooter()

    def on_mount(self) -> None:
        self._layout(self.size.width, self.size.height)
        self.render_state(self.host.state)

    def on_resize(self, event: events.Resize) -> None:
        super().on_resize(event)
        self._layout(event.size.width, event.size.height)

    def _layout(self, width: int, height: int) -> None:
        narrow = width < NARROW_WIDTH or height < SHORT_HEIGHT
        self.set_class(narrow, "-narrow")
        if narrow:
            active = (self.query_one("#panel-tabs", Tabs).active or "tab-metrics").removeprefix("tab-")
            self._show_only(active)
        else:
            for name in TABBED:
                self.query_one(f"#{name}").display = True
            self._redraw()

    def _show_only(self, name: str) -> None:
        for other in TABBED:
            self.query_one(f"#{other}").display = other == name
        self._redraw()

    def _redraw(self) -> None:
        """Draw every panel again once the layout settled: a panel drawn while hidden had no width."""
        self._shown: object = None
        self._drawn: dict[type, object] = {}
        if self.is_mounted:
            self.call_after_refresh(lambda: self.render_state(self.host.state))

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        if self.has_class("-narrow") and event.tab is not None and event.tab.id:
            self._show_only(event.tab.id.removeprefix("tab-"))

    def action_panel(self, name: str) -> None:
        if self.has_class("-narrow"):
            self.query_one("#panel-tabs", Tabs).active = f"tab-{name}"
        else:
            self.query_one(f"#{name}").focus() if self.query_one(f"#{name}").can_focus else None

    # -- rendering -------------------------------------------------------------------------------
    def render_state(self, state: ConsoleState) -> None:
        engine, telemetry = state.engine, state.telemetry
        shown = (engine, telemetry, state.jobs.followed, state.experiments.followed, state.busy, self.size)
        if shown == getattr(self, "_shown", None):
            return  # a change elsewhere (campaign, episodes): nothing here to draw
        self._shown = shown
        narrow = self.has_class("-narrow")
        snap, history = telemetry.snapshot, list(telemetry.history)
        gpus, gpu_error = gpu_views(snap, history)
        # Each panel is drawn only when its own view changed: at idle a new sample changes the CPU pool only.
        metrics, table = metrics_view(snap, history, request_rows(state)), self.size.height >= SHORT_HEIGHT
        cpu, progress = cpu_view(snap, history), run_progress(state)
        log_path = engine.status.log_path if engine.status else None
        views: dict[type, object] = {
            EnginePanel: (
                engine.status,
                engine.knobs,
                state.busy,
                self.host.read_only,
                narrow,
                engine.profile,
                engine.start,
            ),
            MetricsPanel: (metrics, table),
            GpuPanel: (gpus, gpu_error),
            CpuPanel: cpu,
            RunProgress: progress,
            LogTail: (engine.log_tail, log_path, engine.folded),
        }
        # A new size redraws every panel: their text is cut and scaled to their width.
        drawn = getattr(self, "_drawn", {}) if self.size == getattr(self, "_drawn_size", None) else {}
        self._drawn, self._drawn_size = views, self.size
        changed = {kind for kind, view in views.items() if drawn.get(kind) != view}
        if EnginePanel in changed:
            self.query_one(EnginePanel).show(
                engine.status,
                {k.name: k for k in engine.knobs} if engine.status else None,
                busy=state.busy,
                read_only=self.host.read_only,
                compact=narrow,
                next_profile=engine.profile,
                start=engine.start,
            )
        if MetricsPanel in changed:
            self.query_one(MetricsPanel).show(metrics, table=table)
        if GpuPanel in changed:
            self.query_one(GpuPanel).show(gpus, gpu_error)
        if CpuPanel in changed:
            self.query_one(CpuPanel).show(cpu)
        if RunProgress in changed:
            self.query_one(RunProgress).show(*progress)
        if LogTail in changed:
            self.query_one(LogTail).show(list(engine.log_tail), log_path, engine.folded)


def run_progress(state: ConsoleState) -> Progress:
    """(title, done, total, totals, state) of the followed job (a replay) or the followed experiment."""
    job = state.jobs.followed
    if job is not None and job.status is not None and job.status.kind != "experiment":
        return job_progress(job)
    followed = state.experiments.followed
    exp = followed.state if followed is not None else None
    if exp is not None:
        done = sum(1 for c in exp.cells if c.status in ("done", "voided"))
        cur = exp.current
        now = f"now start {cur.start} {cur.arm} ({cur.phase})  " if cur else ""
        totals = f"{now}{exp.wins} won · {exp.losses} lost · {exp.remaining} to go" + (
            "" if exp.can_still_meet else " · the rule can no longer be met"
        )
        return (f"experiment {exp.name}", done, len(exp.cells) or None, totals, exp.status)
    return NO_PROGRESS


def request_rows(state: ConsoleState) -> tuple[RequestRow, ...]:
    """The last requests: the followed replay's own records when it has some (every request, attributed by
    the runner), else the requests the sampler saw running alone."""
    job = state.jobs.followed
    records = [r for r in job.records if r.timed] if job is not None else []
    if records:
        return tuple(
            RequestRow(r.id, r.ttft_s, r.queue_s, r.prefill_s, r.front_end_s, r.prompt_tokens) for r in records[-8:]
        )
    return tuple(
        RequestRow(
            seen.at,
            seen.delta.ttft_s,
            seen.delta.queue_s,
            seen.delta.prefill_s,
            seen.delta.front_end_s,
            None if seen.delta.prompt_tokens is None else int(seen.delta.prompt_tokens),
        )
        for seen in state.telemetry.requests
    )


def cpu_expert_wait(snap: Snapshot | None, history: list[Snapshot] | None = None) -> float | None:
    """The window's CPU-expert wait per verify step (frank.telemetry.sampler.window_cpu_expert_wait, the
    figure the Prometheus export serves from the sampler's own history)."""
    from frank.telemetry.sampler import window_cpu_expert_wait

    return window_cpu_expert_wait(snap, history)


def cpu_decode_view(snap: Snapshot) -> CpuDecodeView | None:
    """The CPU-side decode row beside the verify step (frank.telemetry.cpu_decode): exllamav3's own figures,
    or "–" with why this engine has none. None (no row) for a snapshot made without them (the sampler always
    makes them)."""
    dec = snap.cpu_decode
    if dec is None:
        return None
    return CpuDecodeView(
        why=dec.why,
        exl3=dec.kind == "exl3",
        compute_step_s=dec.compute_step_s,
        compute_job_s=None if dec.compute_us_per_job is None else dec.compute_us_per_job / 1e6,
        stall_step_s=dec.stall_step_s,
        stall_bracket_s=None if dec.stall_median_ms is None else dec.stall_median_ms / 1e3,
        stall_why=dec.stall_why,
        gpu_wait_share=dec.gpu_wait_share,
        pool_busy_share=dec.pool_busy_share,
        pool_spin_s=None if dec.pool_spin_ms is None else dec.pool_spin_ms / 1e3,
        pool_why=dec.pool_why,
        settled=dec.settled,
        settled_why=dec.settled_why,
        swaps_window=dec.swaps_window,
        window_s=snap.engine.rates.window_s if snap.engine.rates is not None else None,
    )


def metrics_view(snap: Snapshot | None, history: list[Snapshot], rows: tuple[RequestRow, ...]) -> MetricsView:
    if snap is None:
        return MetricsView(state="stopped", error="waiting for the first sample", requests=rows)
    eng = snap.engine
    if eng.state in ("stopped", "crashed") or eng.metrics is None or not eng.metrics.ok:
        state = eng.state if eng.state in ("stopped", "starting", "crashed") else "unreachable"
        error = None if state in ("starting", "stopped") else eng.error  # refused while starting is expected
        return MetricsView(state=state, error=error, requests=rows)
    rates = eng.rates
    ms = eng.metrics
    from frank.engine import metrics as m

    def series(fn: Callable[[WindowRates], Any]) -> tuple[Any, ...]:
        return tuple(
            fn(s.engine.rates) if s.engine.rates is not None and s.engine.rates.valid else None for s in history
        )

    by_pos = rates.acceptance_per_position if rates else None
    last_by_pos = next((v for v in reversed(series(lambda r: r.acceptance_per_position)) if v), None)
    return MetricsView(
        state="ok",
        running=ms.gauge(m.RUNNING),
        waiting=ms.gauge(m.WAITING),
        kv_usage=ms.gauge(m.KV_USAGE),
        prefix_hit=rates.prefix_cache_hit_rate if rates else None,
        tokens_s=rates.generation_tokens_per_s if rates else None,
        verify_step=rates.window_verify_step_s if rates else None,
        acceptance=rates.mean_acceptance_length if rates else None,
        verify_hist=series(lambda r: r.window_verify_step_s),
        accept_hist=series(lambda r: r.mean_acceptance_length),
        accept_by_pos=by_pos or last_by_pos,
        accept_by_pos_stale=not by_pos and last_by_pos is not None,
        tokens_hist=series(lambda r: r.generation_tokens_per_s),
        cpu_wait=cpu_expert_wait(snap, history),
        cpu_wait_hist=tuple(cpu_expert_wait(s) for s in history),
        cpu_decode=cpu_decode_view(snap),
        requests=rows,
        not_available=tuple(
            (name, why)
            for name, why in m.not_available(ms).items()
            if name in ("kv_cache_usage", "window_verify_step_s", "acceptance_per_position")
        ),  # of the measures shown here, those this engine kind does not export (llama.cpp), with the reason
        refused_plugins=eng.refused_plugins,
        plugins_vllm=ms.plugins_vllm(),
        verify_why=verify_why(ms),
        acceptance_why=acceptance_why(ms),
    )


def acceptance_why(ms: Any) -> str:
    """Why the acceptance length reads "–" (it shows only then): what the engine's counters say."""
    from frank.engine import metrics as m

    drafts = ms.counter(m.SPEC_DRAFTS)
    if drafts is None:
        return "the engine exports no acceptance (no speculative decoding?)"
    if drafts == 0:
        return "no draft proposed yet (ngram drafts only where the text repeats)"
    return "no draft in the last minutes"


def verify_why(ms: Any) -> str:
    """Why the verify step reads "–"."""
    from frank.engine import metrics as m

    if not ms.has(m.ITL) and ms.kind != "llamacpp":
        return "the engine exports no step times"
    return "no decode step yet (a front-end replay decodes nothing)"


def gpu_views(snap: Snapshot | None, history: list[Snapshot]) -> tuple[list[GpuView], str | None]:
    if snap is None:
        return [], "waiting for the first sample"
    reading = snap.gpu
    out = []
    for g in reading.gpus:

        def hist(attr: str) -> tuple[float | None, ...]:
            vals = []
            for s in history:
                match = [x for x in s.gpu.gpus if x.index == g.index]  # noqa: B023
                vals.append(getattr(match[0], attr) if match else None)
            return tuple(vals)

        link = f"gen{g.pcie_gen} x{g.pcie_width}" if g.pcie_gen else ""
        facts, off = rig_facts_text(
            g.pcie_gen, g.pcie_width, g.pcie_gen_max, g.pcie_width_max, g.power_limit_w, g.power_default_limit_w
        )
        out.append(
            GpuView(
                g.index,
                g.name,
                g.util_gpu,
                g.memory_used,
                g.memory_total,
                g.power_w,
                g.temperature_c,
                g.pcie_tx_bps,
                g.pcie_rx_bps,
                link,
                hist("util_gpu"),
                hist("pcie_tx_bps"),
                hist("pcie_rx_bps"),
                facts,
                off,
            )
        )
    return out, reading.error


def cpu_view(snap: Snapshot | None, history: list[Snapshot]) -> CpuView | None:
    if snap is None:
        return None
    cpu = snap.cpu
    eng = cpu.engine
    pool = eng.expert_pool if eng else None
    gpu = snap.gpu.gpus[0] if snap.gpu.gpus else None
    return CpuView(
        pool=tuple((t.role, t.busy_pct) for t in pool.threads) if pool else None,
        pool_busy=pool.busy_pct if pool else None,
        pool_spins=bool(pool and pool.spin_parked),
        gpu_util=gpu.util_gpu if gpu else None,
        pcie=(gpu.pcie_tx_bps, gpu.pcie_rx_bps) if gpu else None,
        per_core=tuple(cpu.per_core),
        total=cpu.total_percent,
        total_hist=tuple(s.cpu.total_percent for s in history),
        engine_cpu=eng.cpu_percent if eng else None,
        engine_threads=eng.num_threads if eng else None,
        busiest=tuple((t.name, t.cpu_percent) for t in eng.busiest) if eng else (),
        engine_rss=eng.rss_bytes if eng else None,
        ram_used=cpu.ram_used,
        ram_total=cpu.ram_total,
    )
