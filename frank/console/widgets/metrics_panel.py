"""Live engine metrics: verify-step time and acceptance-length sparklines, the acceptance by draft position,
the CPU-side decode figures beside the verify step (the CPU-expert wait, the pool's compute against the GPU's
stall, the hot/cold placement's verdict), throughput, KV usage, prefix cache hit rate, frank's vLLM parts that refused to load, and a table of the last requests' TTFT / queue / prefill / front-end (updated by row key)."""  # noqa: E501

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.widgets import DataTable, Static

from frank.console.widgets.fmt import num, pct, secs, spark


@dataclass(frozen=True)
class RequestRow:
    key: str
    ttft: float | None
    queue: float | None
    prefill: float | None
    front_end: float | None
    tokens: int | None = None


@dataclass(frozen=True)
class CpuDecodeView:
    """The CPU-side decode figures beside the verify step (frank.telemetry.cpu_decode: exllamav3's own, read
    from its log as they come), or why the engine gives none."""

    why: str | None = None  # why the pool's compute reads "–" (an engine that is not exllamav3: why it has none)
    exl3: bool = False  # an exllamav3 engine: its stall and placement lines are shown too
    compute_step_s: float | None = None  # the CPU pool's compute a verify step (at most)
    compute_job_s: float | None = None  # its mean a job (shown where the split layers are not known)
    stall_step_s: float | None = None  # the GPU's wait for the CPU's experts a verify step
    stall_bracket_s: float | None = None  # its median a collect (where the split layers are not known)
    stall_why: str | None = None  # why the stall reads "–"
    gpu_wait_share: float | None = None  # stall a step / verify step (0-1)
    pool_busy_share: float | None = None  # the CPU worker's compute over its time (0-1)
    pool_spin_s: float | None = None  # its wait a job for the GPU's inputs
    pool_why: str | None = None  # why the pool's side reads "–"
    settled: bool | None = None  # the hot/cold placement (None: no verdict, settled_why says why)
    settled_why: str = ""
    swaps_window: int | None = None
    window_s: float | None = None


# What the metrics panel shows: live numbers (ok), or why there are none.
MetricsState = Literal["ok", "unreachable", "error", "stopped", "starting", "crashed"]


@dataclass(frozen=True)
class MetricsView:
    state: MetricsState
    error: str | None = None
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None  # 0-1
    prefix_hit: float | None = None  # 0-1
    tokens_s: float | None = None
    verify_step: float | None = None  # seconds per verify step
    acceptance: float | None = None  # mean accepted tokens per verify step (incl. the bonus token)
    verify_hist: tuple[float | None, ...] = ()
    accept_hist: tuple[float | None, ...] = ()
    # share of drafted steps that accepted draft position i (frank.engine.measures.per_position_acceptance)
    accept_by_pos: tuple[float, ...] | None = None
    accept_by_pos_stale: bool = False  # no drafts this window: the last window's values, dimmed
    tokens_hist: tuple[float | None, ...] = ()
    # the CPU-expert decode wait per verify step over the window (llama.cpp's pool); None: no such pool
    cpu_wait: float | None = None
    cpu_wait_hist: tuple[float | None, ...] = ()
    cpu_decode: CpuDecodeView | None = None  # None: no row (a view made without one)
    requests: tuple[RequestRow, ...] = ()
    not_available: tuple[tuple[str, str], ...] = ()  # (measure, why this engine does not export it)
    refused_plugins: tuple[str, ...] = ()  # frank's vLLM parts off on this engine: its vLLM internals differ
    plugins_vllm: str = ""  # the vLLM version they checked against
    verify_why: str = ""  # why the verify step reads "–" (no value in the window nor in the history)
    acceptance_why: str = ""  # why the acceptance length and by-position read "–"


COLUMNS = (
    ("ttft", "TTFT"),
    ("queue", "queue"),
    ("prefill", "prefill"),
    ("front_end", "front end"),
    ("tokens", "tokens"),
)
MAX_ROWS = 8


def _latest(
    value: float | None, history: tuple[float | None, ...], fmt: Callable[[float | None], str], why: str = ""
) -> str:
    """The value right-aligned in 9 columns; with none this second (no verify step ran), the history's last
    one, dimmed, so the number never disagrees with the sparkline beside it; with none at all, "–" and why."""
    if value is not None:
        return f"{fmt(value):>9}"
    last = next((v for v in reversed(history) if v is not None), None)
    if last is None:
        return f"{fmt(None):>9}" + (f" [$frank-idle]{escape(why)}[/]" if why else "")
    return f"[$frank-idle]{fmt(last):>9}[/]"


def _spark(history: tuple[float | None, ...], width: int, lo: float) -> str:
    """A space and the sparkline, or nothing while the history has no value (the line says why instead)."""
    if all(v is None for v in history):
        return ""
    return f" [$frank-spark]{spark(history, width, lo)}[/]"


def _by_position(view: MetricsView) -> str:
    if not view.accept_by_pos:
        return f"{'–':>9}" + (f" [$frank-idle]{escape(view.acceptance_why)}[/]" if view.acceptance_why else "")
    text = " ".join(f"{v * 100:3.0f}%" for v in view.accept_by_pos)
    return f"[$frank-idle]{text}[/]" if view.accept_by_pos_stale else text


def _dash(why: str | None) -> str:
    return f"{'–':>9}" + (f" [$frank-idle]{escape(why)}[/]" if why else "")


def _micro(value: float) -> str:
    """A wait of microseconds (the pool's spin for the GPU's inputs) in µs; from 1 ms as secs() writes it."""
    return f"{value * 1e6:.0f} µs" if value < 0.9995e-3 else secs(value)


def _cpu_decode(view: CpuDecodeView | None) -> list[str]:
    """exllamav3's CPU pool's compute and the GPU's stall a verify step, the GPU's idle share of the step, the
    pool's own busy share and wait for the GPU, and the placement's verdict, a line each; one "–" line and why
    for an engine that gives none."""
    if view is None:
        return []
    if not view.exl3:
        return [f"[$frank-idle]cpu pool   [/] {_dash(view.why)}"]
    if view.compute_step_s is not None:
        compute = f"{secs(view.compute_step_s):>9} [$frank-idle]a step (at most)[/]"
    elif view.compute_job_s is not None:
        compute = f"{secs(view.compute_job_s):>9} [$frank-idle]a job[/]"
    else:
        compute = _dash(view.why)
    if view.stall_step_s is not None:
        share = None if view.gpu_wait_share is None else view.gpu_wait_share * 100
        stall = f"{secs(view.stall_step_s):>9} [$frank-idle]a step · GPU idle[/] {pct(share, 1)}"
    elif view.stall_bracket_s is not None:
        stall = f"{secs(view.stall_bracket_s):>9} [$frank-idle]a collect (median)[/]"
    else:
        stall = _dash(view.stall_why)
    if view.pool_busy_share is not None:
        spin = "" if view.pool_spin_s is None else f" · waits on GPU {_micro(view.pool_spin_s)} a job"
        pool = f"{pct(view.pool_busy_share * 100, 0):>9} [$frank-idle]busy{spin}[/]"
    else:
        pool = _dash(view.pool_why)
    word = {True: "settled", False: "settling", None: "–"}[view.settled]
    swaps = f" · {view.swaps_window} in {view.window_s:.0f} s" if view.swaps_window and view.window_s else ""
    return [
        f"[$frank-idle]cpu compute[/] {compute}",
        f"[$frank-idle]gpu stall  [/] {stall}",
        f"[$frank-idle]cpu pool   [/] {pool}",
        f"[$frank-idle]placement  [/] {word:>9} [$frank-idle]{escape(view.settled_why)}{swaps}[/]",
    ]


def _refused(view: MetricsView) -> list[str]:
    """One line naming frank's vLLM parts that refused to load (vLLM's internals differ), or none."""
    if not view.refused_plugins:
        return []
    on = f" on vLLM {view.plugins_vllm}" if view.plugins_vllm else ""
    parts = ", ".join(view.refused_plugins)
    return [f"[$frank-warn]parts off{escape(on)} (its internals differ): {escape(parts)}[/]"]


class MetricsPanel(Vertical):
    DEFAULT_CSS = """
    MetricsPanel { border: round $frank-border; border-title-color: $frank-idle; padding: 0 1; height: auto; }
    MetricsPanel > #metrics-text { height: auto; }
    MetricsPanel > DataTable { height: auto; max-height: 10; margin-top: 1; overflow-x: hidden; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.border_title = "engine metrics"
        self.border_subtitle = "window means · ? legend"
        self.tooltip = (
            "means over the last sampling window (about 10 s): verify step = time of one decode step; accept "
            "len = tokens a verify step yields (1 + accepted drafts); by position = share of drafted steps "
            "that accepted draft token 1, 2, …; the table: the last requests' own times. ? shows the legend."
        )
        self._markup = ""
        self._row_keys: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="metrics-text")
        table: DataTable[str] = DataTable(id="requests", cursor_type="none", zebra_stripes=False, show_cursor=False)
        table.can_focus = False
        yield table

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_column("request", key="req")
        for key, label in COLUMNS:
            table.add_column(label, key=key)

    # Sparklines start at the series' floor (0 s, an acceptance length of 1), not at their minimum: a steady
    # 4.36 then 4.40 must not read as an empty bar then a full one.
    def show(self, view: MetricsView, table: bool = True) -> None:
        """`table`: show the last requests (a short terminal has no room for them: the Replays screen has)."""
        width = max(8, (self.content_size.width or 60) - 30)
        if view.state != "ok":
            reason = {
                "stopped": "engine not running: s starts it",
                "unreachable": "engine unreachable",
                "starting": "engine starting…",
                "crashed": "engine crashed",
            }.get(view.state, view.state)
            markup = f"[$frank-idle]{escape(reason)}[/]" + (
                f" [$frank-idle]({escape(view.error)})[/]" if view.error else ""
            )
        else:
            markup = "\n".join(
                [
                    f"[$frank-idle]verify step[/] {_latest(view.verify_step, view.verify_hist, secs, view.verify_why)}"
                    + _spark(view.verify_hist, width, 0),
                    f"[$frank-idle]accept len [/] "
                    f"{_latest(view.acceptance, view.accept_hist, lambda v: num(v, 2), view.acceptance_why)}"
                    + _spark(view.accept_hist, width, 1),
                    f"[$frank-idle]by position[/] {_by_position(view)}",
                ]
                + (
                    [
                        f"[$frank-idle]cpu wait   [/] {_latest(view.cpu_wait, view.cpu_wait_hist, secs)} "
                        f"[$frank-spark]{spark(view.cpu_wait_hist, width, 0)}[/]"
                    ]
                    if any(v is not None for v in (view.cpu_wait, *view.cpu_wait_hist))
                    else []
                )
                + _cpu_decode(view.cpu_decode)
                + [
                    f"[$frank-idle]tokens/s   [/] {num(view.tokens_s):>9} "
                    f"[$frank-spark]{spark(view.tokens_hist, width, 0)}[/]",
                    f"[$frank-idle]running[/] {num(view.running, 0)}  [$frank-idle]waiting[/] {num(view.waiting, 0)}  "
                    f"[$frank-idle]KV cache[/] {pct(None if view.kv_usage is None else view.kv_usage * 100, 1)}  "
                    f"[$frank-idle]prefix hits[/] {pct(None if view.prefix_hit is None else view.prefix_hit * 100, 1)}",
                ]
                + [f"[$frank-idle]n/a {escape(name)}: {escape(why)}[/]" for name, why in view.not_available]
                + _refused(view)
            )
        if markup != self._markup:
            layout = markup.count("\n") != self._markup.count("\n") or not self._markup
            self._markup = markup
            self.query_one("#metrics-text", Static).update(markup, layout=layout)
        self._apply_rows(view.requests[-MAX_ROWS:], table)

    def _apply_rows(self, rows: tuple[RequestRow, ...], visible: bool = True) -> None:
        """Add new rows and drop old ones by key; existing rows are updated cell by cell."""
        table = self.query_one(DataTable)
        keys = [r.key for r in rows]
        for old in [k for k in self._row_keys if k not in keys]:
            table.remove_row(old)
        existing = set(self._row_keys) & set(keys)
        for row in rows:
            cells = {
                "ttft": secs(row.ttft),
                "queue": secs(row.queue),
                "prefill": secs(row.prefill),
                "front_end": secs(row.front_end),
                "tokens": "–" if row.tokens is None else str(row.tokens),
            }
            if row.key in existing:
                for col, value in cells.items():
                    if table.get_cell(row.key, col) != value:
                        table.update_cell(row.key, col, value)
            else:
                table.add_row(row.key, *cells.values(), key=row.key)
        if keys != self._row_keys and keys:
            table.call_after_refresh(table.scroll_end, animate=False)  # a short table shows the newest rows
        self._row_keys = keys
        if table.display != (bool(keys) and visible):
            table.display = bool(keys) and visible
