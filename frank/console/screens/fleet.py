"""The fleet: one row per host of the fleet file, read from the fleet's Prometheus (frank.fleet.query): whether
its exporter answers, its engine's state and what it runs (profile, experiment, arm), CPU, GPU utilisation
and memory, PCIe, the CPU-expert pool, the verify step and tokens/s, with sparklines of the last minutes.
A host that stops answering reads "not answering" from the next scrape on. `frank fleet status` is its twin.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.markup import escape
from rich.text import Text
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
    ("runs", 36),
    ("cpu %", 5),
    ("gpu %", 5),
    ("gpu mem", 12),
    ("PCIe", 11),
    ("pool", 10),
    ("step ms", 7),
    ("tok/s", 7),
    ("tok/s trend", 20),
)


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
        table = self.query_one("#fleet-hosts", DataTable)
        for label, width in COLUMNS:
            table.add_column(label, key=label, width=width)

    def render_state(self, state: ConsoleState) -> None:
        view = state.fleet
        if view == self._shown:
            return
        self._shown = view
        head = self.query_one("#fleet-head", Static)
        if view.error:
            update_text(head, f"[b]fleet[/]  [$error]{escape(view.error)}[/]")
        else:
            up = sum(1 for h in view.hosts if h.up)
            update_text(head, f"[b]fleet[/]  {up} of {len(view.hosts)} hosts answering  via {escape(view.prometheus)}")
        table = self.query_one("#fleet-hosts", DataTable)
        table.clear()
        for h in view.hosts:
            table.add_row(*host_cells(h), key=h.host)
