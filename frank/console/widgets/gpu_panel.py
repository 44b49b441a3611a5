"""GPU panel: one block per device with utilization, memory, power, temperature and PCIe sparklines.
Sparklines share one column so devices can be compared at a glance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.markup import escape

from frank.console.widgets.base import Panel
from frank.console.widgets.fmt import nbytes, pct, rate, spark


@dataclass(frozen=True)
class GpuView:
    """What the panel draws for one device (the dashboard maps telemetry snapshots to this)."""

    index: int
    name: str
    util: float | None
    mem_used: float | None
    mem_total: float | None
    power_w: float | None
    temp_c: float | None
    pcie_tx: float | None  # bytes/s
    pcie_rx: float | None
    link: str = ""  # "gen5 x16"
    util_hist: tuple[float | None, ...] = ()
    tx_hist: tuple[float | None, ...] = ()
    rx_hist: tuple[float | None, ...] = ()


LABEL = 9  # "PCIe tx  "
VALUE = 12  # "12.3 GiB/s "


class GpuPanel(Panel):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("gpu", **kwargs)

    def show(self, gpus: list[GpuView], error: str | None = None) -> None:
        if not gpus:
            reason = error or "no GPU telemetry (no NVIDIA device)"
            if not reason.startswith("no GPU telemetry"):
                reason = f"no GPU telemetry ({reason})"
            self.set_markup(f"[$frank-idle]{escape(reason)}[/]")
            return
        width = max(8, min(60, (self.content_size.width or 50) - LABEL - VALUE - 2))
        lines: list[str] = []
        for g in gpus:
            name = g.name.removeprefix("NVIDIA ")
            mem = (
                f"{g.mem_used / 2**30:.1f}/{g.mem_total / 2**30:.0f} GiB"
                if g.mem_total and g.mem_used is not None
                else nbytes(g.mem_used)
            )
            power = f"{g.power_w:.0f} W" if g.power_w is not None else "– W"
            temp = f"{g.temp_c:.0f}°C" if g.temp_c is not None else "–°C"
            hot = "$frank-bad" if (g.util or 0) >= 95 else "$frank-ok"
            peak = max([v for v in (*g.tx_hist, *g.rx_hist) if v is not None] or [1.0])
            lines.append(f"[bold]{g.index} {escape(name)}[/]  {mem}  {power}  {temp}")
            lines.append(
                f"  [$frank-idle]{'util':<{LABEL - 2}}[/][{hot}]{pct(g.util):>{VALUE - 1}}[/] "
                f"[$frank-spark]{spark(g.util_hist, width, 0, 100)}[/]"
            )
            lines.append(
                f"  [$frank-idle]{'PCIe tx':<{LABEL - 2}}[/]{rate(g.pcie_tx):>{VALUE - 1}} "
                f"[$frank-spark]{spark(g.tx_hist, width, 0, peak)}[/]"
            )
            lines.append(
                f"  [$frank-idle]{'PCIe rx':<{LABEL - 2}}[/]{rate(g.pcie_rx):>{VALUE - 1}} "
                f"[$frank-spark]{spark(g.rx_hist, width, 0, peak)}[/]"
            )
        links = {g.link for g in gpus if g.link}
        self.set_subtitle(f"PCIe {links.pop()}" if len(links) == 1 else "")
        self.set_markup("\n".join(lines))
