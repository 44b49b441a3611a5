"""CPU-pool panel: a per-core heat strip (up to 128 cores, wrapped to the panel width), the engine's
process tree (CPU, threads, the busiest threads: the CPU-expert pool shows up there) and RAM."""
from __future__ import annotations

from dataclasses import dataclass

from textual.markup import escape

from console.widgets.base import Panel
from console.widgets.fmt import BLOCKS, nbytes, pct, spark


@dataclass(frozen=True)
class CpuView:
    per_core: tuple[float, ...]
    total: float | None = None
    total_hist: tuple[float | None, ...] = ()
    engine_cpu: float | None = None          # percent of one core, summed over the process tree
    engine_threads: int | None = None
    busiest: tuple[tuple[str, float], ...] = ()   # (thread name or id, percent)
    engine_rss: float | None = None
    ram_used: float | None = None
    ram_total: float | None = None


def heat_style(percent: float) -> str:
    if percent < 10:
        return "$frank-idle"
    if percent < 50:
        return "$frank-ok"
    if percent < 85:
        return "$frank-warn"
    return "$frank-bad"


def heat_strip(per_core: tuple[float, ...], width: int) -> list[str]:
    """Rows of one cell per core, as even as the width allows (64 cores at 58 columns: 2 rows of 32).
    A cell's height and colour both show the load, so it reads without colour too."""
    width = max(8, width)
    n = len(per_core)
    rows_needed = max(1, -(-n // width))
    per_row = -(-n // rows_needed) if n else width
    rows: list[str] = []
    for start in range(0, n, per_row):
        parts: list[str] = []
        style, run = "", ""
        for value in per_core[start:start + per_row]:
            s = heat_style(value)
            if s != style and run:
                parts.append(f"[{style}]{run}[/]")
                run = ""
            style = s
            run += BLOCKS[min(len(BLOCKS) - 1, int(max(0.0, min(100.0, value)) / 100 * len(BLOCKS)))]
        if run:
            parts.append(f"[{style}]{run}[/]")
        rows.append("".join(parts))
    return rows


class CpuPanel(Panel):
    def __init__(self, **kwargs) -> None:
        super().__init__("cpu pool", **kwargs)

    def show(self, cpu: CpuView | None, error: str | None = None) -> None:
        if cpu is None:
            self.set_markup(f"[$frank-idle]{escape(error or 'waiting for the first sample…')}[/]")
            return
        width = (self.content_size.width or 60)
        n = len(cpu.per_core)
        self.border_subtitle = f"{n} cores"
        lines = heat_strip(cpu.per_core, width)
        lines.append(f"[$frank-idle]all[/] {pct(cpu.total):>4} "
                     f"[$frank-spark]{spark(cpu.total_hist, max(8, min(48, width - 10)), 0, 100)}[/]")
        eng = (f"[$frank-idle]engine[/] {pct(cpu.engine_cpu)}  {cpu.engine_threads or '–'} threads  "
               f"rss {nbytes(cpu.engine_rss)}") if cpu.engine_cpu is not None else "[$frank-idle]engine not running[/]"
        lines.append(eng)
        if cpu.busiest:
            busy = "  ".join(f"{escape(str(name))[:14]} {p:.0f}%" for name, p in cpu.busiest[:4])
            lines.append(f"[$frank-idle]busiest[/] {busy}")
        lines.append(f"[$frank-idle]ram[/] {nbytes(cpu.ram_used)}/{nbytes(cpu.ram_total)}")
        self.set_markup("\n".join(lines))
