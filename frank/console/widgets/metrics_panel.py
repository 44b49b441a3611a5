"""Live engine metrics: verify-step time and acceptance-length sparklines, the acceptance by draft position,
throughput, KV usage, prefix cache hit rate, frank's vLLM parts that refused to load, and a table of the last requests' TTFT / queue / prefill / front-end (updated by row key)."""  # noqa: E501

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
    requests: tuple[RequestRow, ...] = ()
    not_available: tuple[tuple[str, str], ...] = ()  # (measure, why this engine does not export it)
    refused_plugins: tuple[str, ...] = ()  # frank's vLLM parts off on this engine: its vLLM internals differ
    plugins_vllm: str = ""  # the vLLM version they checked against


COLUMNS = (
    ("ttft", "TTFT"),
    ("queue", "queue"),
    ("prefill", "prefill"),
    ("front_end", "front-end"),
    ("tokens", "tokens"),
)
MAX_ROWS = 8


def _latest(value: float | None, history: tuple[float | None, ...], fmt: Callable[[float | None], str]) -> str:
    """The value right-aligned in 9 columns; with none this second (no verify step ran), the history's last
    one, dimmed, so the number never disagrees with the sparkline beside it."""
    if value is not None:
        return f"{fmt(value):>9}"
    last = next((v for v in reversed(history) if v is not None), None)
    return f"{fmt(None):>9}" if last is None else f"[$frank-idle]{fmt(last):>9}[/]"


def _by_position(view: MetricsView) -> str:
    if not view.accept_by_pos:
        return f"{'–':>9}"
    text = " ".join(f"{v * 100:3.0f}%" for v in view.accept_by_pos)
    return f"[$frank-idle]{text}[/]" if view.accept_by_pos_stale else text


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
                "stopped": "engine not running",
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
                    f"[$frank-idle]verify step[/] {_latest(view.verify_step, view.verify_hist, secs)} "
                    f"[$frank-spark]{spark(view.verify_hist, width, 0)}[/]",
                    f"[$frank-idle]accept len [/] {_latest(view.acceptance, view.accept_hist, lambda v: num(v, 2))} "
                    f"[$frank-spark]{spark(view.accept_hist, width, 1)}[/]",
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
