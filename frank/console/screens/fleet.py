"""The fleet: one row per host of the fleet file, read from the fleet's Prometheus (frank.fleet.query): whether
its exporter answers, its engine's state and what it runs (profile, experiment, arm), CPU, GPU utilisation
and memory, PCIe, the CPU-expert pool, the verify step and tokens/s, with sparklines of the last minutes.
A host that stops answering reads "not answering" from the next scrape on. `frank fleet status` is its twin.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.markup import escape
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import DataTable, Header, Static

from frank.console.screens.base import FrankScreen
from frank.console.state import ConsoleState, FleetView
from frank.console.widgets.base import update_text
from frank.console.widgets.footer import FrankFooter

BARS = "▁▂▃▄▅▆▇█"
# (label, width): fixed widths, so a later, longer value ("not answering") is not cut to an earlier one's width
COLUMNS = (
    ("host", 10),
    ("engine", 13),
    ("runs", 24),
    ("cpu %", 5),
    ("gpu %", 5),
    ("gpu mem", 12),
    ("PCIe", 11),
    ("pool", 10),
    ("step ms", 7),
    ("tok/s", 7),
    ("tok/s trend", 20),
)


# Which columns stay when the screen is too narrow for all of them: a column goes whole, never cut mid-figure.
KEEP_FIRST = ("host", "engine", "tok/s", "step ms", "gpu %", "cpu %", "gpu mem", "runs", "pool", "PCIe", "tok/s trend")


def fitting(width: int) -> tuple[str, ...]:
    """The columns (in their order) that fit `width` cells whole, the first of KEEP_FIRST first."""
    widths = dict(COLUMNS)
    kept: list[str] = []
    used = 2  # the vertical scrollbar
    for label in KEEP_FIRST:
        if used + widths[label] + 2 <= width:  # a cell's padding: one each side
            kept.append(label)
            used += widths[label] + 2
    return tuple(label for label, _ in COLUMNS if label in kept)


def sparkline(values: list[float], width: int = 20) -> str:
    values = values[-width:]
    if not values:
        return ""
    top = max(values)
    if top <= 0:
        return BARS[0] * len(values)
    return "".join(BARS[min(len(BARS) - 1, int(v / top * (len(BARS) - 1) + 0.5))] for v in values)


def _num(value: float | None, fmt: str, scale: float = 1.0) -> str:
    return "-" if value is None else fmt.format(value * scale)


def _runs(runs: dict[str, str]) -> str:
    """A cell's run, arm and campaign part (the arm names the profile), else the engine's profile."""
    keys = ("experiment", "arm", "part") if runs.get("experiment") else ("profile",)
    return " ".join(runs.get(k, "") for k in keys).strip() or "-"


def host_cells(h: Any) -> tuple[str | Text, ...]:
    f = h.figures
    engine = Text(h.engine, style="bold red" if not h.up else ("bold green" if h.engine == "ready" else ""))
    used, total = f.get("gpu_memory_used_bytes"), f.get("gpu_memory_total_bytes")
    memory = "-" if used is None else f"{used / 2**30:.1f}/{(total or 0) / 2**30:.0f} GiB"
    pool = f.get("cpu_pool_busy_percent")
    return (
        h.host,
        engine,
        _runs(h.runs),
        _num(f.get("cpu_percent"), "{:.0f}"),
        _num(f.get("gpu_util_percent"), "{:.0f}"),
        memory,
        _num(f.get("pcie_bytes_per_s"), "{:.1f} MB/s", 1e-6),
        "-" if pool is None else f"{pool:.0f}% of {f.get('cpu_pool_threads') or 0:.0f}",
        _num(f.get("verify_step_s"), "{:.2f}", 1e3),
        _num(f.get("tokens_per_s"), "{:.1f}"),
        sparkline(h.sparks.get("tokens_per_s", [])),
    )


class FleetScreen(FrankScreen):
    TITLE = "fleet"
    BINDINGS: ClassVar[list[BindingType]] = []  # a read of Prometheus: no action of its own
    DEFAULT_CSS = """
    #fleet-hosts { height: auto; max-height: 24; }
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._shown: FleetView | None = None

    def compose(self) -> ComposeResult:
        yield Header(icon="≡")
        yield Static("[$frank-idle]reading the fleet's Prometheus...[/]", id="fleet-head", classes="section")
        yield DataTable(id="fleet-hosts", cursor_type="row")
        yield FrankFooter()

    def on_mount(self) -> None:
        self._columns: tuple[str, ...] = ()
        self._fit(self.size.width)

    def on_resize(self, event: events.Resize) -> None:
        super().on_resize(event)
        if self.is_mounted:
            self._fit(event.size.width)

    def _fit(self, width: int) -> None:
        """Only the columns that fit whole (a narrow terminal drops the least needed ones)."""
        columns = fitting(width or 120)
        if columns == self._columns:
            return
        self._columns = columns
        table = self.query_one("#fleet-hosts", DataTable)
        table.clear(columns=True)
        for label, cells in COLUMNS:
            if label in columns:
                table.add_column(label, key=label, width=cells)
        self._shown = None  # draw the rows again under the new columns
        self.render_state(self.host.state)

    def render_state(self, state: ConsoleState) -> None:
        view = state.fleet
        if view == self._shown or not view.fleet_file:
            return  # nothing read yet
        self._shown = view
        kept = [i for i, (label, _) in enumerate(COLUMNS) if label in self._columns]
        hidden = len(COLUMNS) - len(kept)
        if view.error:
            then = "  [$frank-idle]then ctrl+p: Fleet: start its Prometheus[/]" if "no fleet file" in view.error else ""
            text = f"[b]fleet[/]  [$error]{escape(view.error)}[/]{then}"
        else:
            up = sum(1 for h in view.hosts if h.up)
            text = f"[b]fleet[/]  {up} of {len(view.hosts)} hosts answering  via {escape(view.prometheus)}"
            if hidden:
                text += f"  [$frank-idle]({hidden} more columns in a wider terminal)[/]"
        update_text(self.query_one("#fleet-head", Static), text)
        table = self.query_one("#fleet-hosts", DataTable)
        table.clear()
        for h in view.hosts:
            cells = host_cells(h)
            table.add_row(*(cells[i] for i in kept), key=h.host)
