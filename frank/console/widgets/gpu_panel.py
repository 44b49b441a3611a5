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
    facts: str = ""  # the rig's fixed facts: "PCIe gen5 x16 of gen5 x16 · limit 700 of 700 W" (`rig_facts_text`)
    facts_off: bool = False  # the link below its maximum or the power limit below the default


def rig_facts_text(
    gen: int | None,
    width: int | None,
    gen_max: int | None,
    width_max: int | None,
    limit_w: float | None,
    default_w: float | None,
) -> tuple[str, bool]:
    """The rig's fixed facts of one card as the panel shows them, and whether one is below the card's own
    (a link trained down, a power limit lowered): ("PCIe gen4 x16 of gen5 x16 · limit 600 of 700 W", True)."""
    parts, off = [], False
    if gen is not None and width is not None:
        link = f"PCIe gen{gen} x{width}"
        if gen_max is not None and width_max is not None:
            link += f" of gen{gen_max} x{width_max}"
            off = off or gen < gen_max or width < width_max
        parts.append(link)
    if limit_w is not None:
        power = f"limit {limit_w:.0f}"
        if default_w is not None:
            power += f" of {default_w:.0f}"
            off = off or limit_w < default_w
        parts.append(power + " W")
    return " · ".join(parts), off


LABEL = 9  # "PCIe tx  "
VALUE = 12  # "12.3 GiB/s "


# NVML's reason (frank.telemetry.gpu) -> what it means for the person at the console
NVML_WORDS = (
    ("NVML Shared Library Not Found", "no NVIDIA driver on this machine"),
    ("nvidia-ml-py is not installed", "no NVIDIA driver library (nvidia-ml-py) in frank's venv"),
    ("Driver Not Loaded", "the NVIDIA driver is installed but not loaded"),
    ("NVML sees no GPU", "no NVIDIA GPU on this machine"),
)


def no_gpu_words(error: str | None) -> str:
    """Why there is no GPU to show, in words: "no NVIDIA driver on this machine (no GPU telemetry)"."""
    reason = error or "no GPU telemetry (no NVIDIA device)"
    for found, words in NVML_WORDS:
        if found in reason:
            return f"{words}: no GPU telemetry"
    return reason if reason.startswith("no GPU telemetry") else f"no GPU telemetry ({reason})"


class GpuPanel(Panel):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("gpu", **kwargs)

    def show(self, gpus: list[GpuView], error: str | None = None) -> None:
        if not gpus:
            self.set_markup(f"[$frank-idle]{escape(no_gpu_words(error))}[/]")
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
            if g.facts:
                lines.append(f"  [{'$frank-bad' if g.facts_off else '$frank-idle'}]{escape(g.facts)}[/]")
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
