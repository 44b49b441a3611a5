"""CPU-pool panel: a per-core heat strip (up to 128 cores, wrapped to the panel width), the engine's
process tree (CPU, threads, the busiest threads) and RAM. For a llama.cpp engine the busiest-threads line
becomes its CPU-expert pool (frank.telemetry.expert_pool): the pool's share, each thread's busy percent (m
the main loop, w the workers), beside the GPU's utilisation and its PCIe traffic."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from frank.console.widgets.fmt import BLOCKS, nbytes, pct, spark
from frank.console.widgets.line_panel import LinePanel, Piece


@dataclass(frozen=True)
class CpuView:
    per_core: tuple[float, ...]
    total: float | None = None
    total_hist: tuple[float | None, ...] = ()
    engine_cpu: float | None = None  # percent of one core, summed over the process tree
    engine_threads: int | None = None
    busiest: tuple[tuple[str, float], ...] = ()  # (thread name or id, percent)
    engine_rss: float | None = None
    ram_used: float | None = None
    ram_total: float | None = None
    pool: tuple[tuple[str, float], ...] | None = None  # (role, busy percent) per pool thread; None: no pool
    pool_busy: float | None = None  # the pool's share of its n cores, percent
    pool_spins: bool = False  # its workers spin while they wait (exllamav3): busy is an upper bound
    gpu_util: float | None = None  # the first GPU's, percent
    pcie: tuple[float | None, float | None] | None = None  # (tx, rx) bytes/s of the first GPU


def heat_style(percent: float) -> str:
    if percent < 10:
        return "$frank-idle"
    if percent < 50:
        return "$frank-ok"
    if percent < 85:
        return "$frank-warn"
    return "$frank-bad"


MAX_CELL = 5  # columns per core when there is room (a 2-core box gets 5-column cells, not 2 dots)


def heat_rows(per_core: tuple[float, ...], width: int) -> list[list[Piece]]:
    """Rows of one cell per core, as even as the width allows (64 cores at 58 columns: 2 rows of 32).
    A cell's height and colour both show the load, so it reads without colour too. With room to spare the
    cells widen (up to MAX_CELL columns, one blank between them) and a row of per-core percentages sits
    under them, so a few cores read as clearly as many."""
    width = max(8, width)
    n = len(per_core)
    if n == 0:
        return []
    gap = 1 if 2 * n - 1 <= width else 0
    cell = max(1, min(MAX_CELL, (width + gap) // n - gap))
    per_row = n if n * (cell + gap) - gap <= width else max(1, (width + gap) // (cell + gap))
    rows_needed = -(-n // per_row)
    per_row = -(-n // rows_needed)  # even rows: 128 cores at 58 columns -> 3 rows of 43
    rows: list[list[Piece]] = []
    for start in range(0, n, per_row):
        chunk = per_core[start : start + per_row]
        cells: list[Piece] = []
        for i, value in enumerate(chunk):
            v = max(0.0, min(100.0, value))
            block = BLOCKS[min(len(BLOCKS) - 1, int(v / 100 * len(BLOCKS)))]
            if i and gap:
                cells.append((" ", ""))
            cells.append((block * cell, heat_style(v)))
        rows.append(cells)
        if cell >= 4:  # few cores: their numbers fit under the cells
            numbers = (" " * gap).join(f"{max(0.0, min(100.0, v)):.0f}%".rjust(cell) for v in chunk)
            rows.append([(numbers, "$frank-idle")])
    return rows


def heat_strip(per_core: tuple[float, ...], width: int) -> list[str]:
    """`heat_rows` as Textual markup."""
    return [
        "".join(f"[{style}]{text}[/]" if style else text for text, style in row) for row in heat_rows(per_core, width)
    ]


class CpuPanel(LinePanel):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("cpu pool", **kwargs)

    def show(self, cpu: CpuView | None, error: str | None = None) -> None:
        if cpu is None:
            self.set_rows([((error or "waiting for the first sample…", "$frank-idle"),)])
            return
        width = self.content_size.width or 60
        n = len(cpu.per_core)
        self.set_subtitle(f"{n} cores")
        lines: list[list[Piece]] = heat_rows(cpu.per_core, width)
        spark_line = spark(cpu.total_hist, max(8, min(48, width - 16)), 0, 100)
        lines.append([("all cores", "$frank-idle"), (f" {pct(cpu.total):>4} ", ""), (spark_line, "$frank-spark")])
        if cpu.engine_cpu is not None:
            rss = f"{pct(cpu.engine_cpu)}  {cpu.engine_threads or '–'} threads  rss {nbytes(cpu.engine_rss)}"
            lines.append([("engine", "$frank-idle"), (f" {rss}", "")])
        else:
            lines.append([("engine not running", "$frank-idle")])
        # Always this line (a dash when there is none) and cut to the width: a line that comes and goes,
        # or wraps, changes the panel's height and re-lays out the whole screen.
        if cpu.pool is not None:
            lines.append([("experts", "$frank-idle"), (f" {_pool_text(cpu, width - len('experts '))}", "")])
            lines.append([("ram", "$frank-idle"), (f" {nbytes(cpu.ram_used)}/{nbytes(cpu.ram_total)}", "")])
            self.set_rows([tuple(line) for line in lines])
            return
        busy: list[str] = []
        room = width - len("busiest ")
        for name, p in cpu.busiest[:4]:
            item = f"{str(name)[:14]} {p:.0f}%"
            if len(item) + 2 * len(busy) + sum(map(len, busy)) > room:
                break
            busy.append(item)
        lines.append([("busiest", "$frank-idle"), (f" {'  '.join(busy) or '–'}", "")])
        lines.append([("ram", "$frank-idle"), (f" {nbytes(cpu.ram_used)}/{nbytes(cpu.ram_total)}", "")])
        self.set_rows([tuple(line) for line in lines])


def _pool_text(cpu: CpuView, room: int) -> str:
    """`44% busy on 2 threads (main 49%, worker 39%) · gpu 35% busy, pcie 1.2G/s out 100M/s in`: every
    number named. What does not fit gives way: the per-thread part first (thread by thread), then the pcie."""
    n = len(cpu.pool or ())
    head = (
        f"{pct(cpu.pool_busy)} {'busy or spinning' if cpu.pool_spins else 'busy'} on {n} thread{'s' if n != 1 else ''}"
    )
    gpu = f"gpu {pct(cpu.gpu_util)} busy"
    pcie = ""
    if cpu.pcie is not None:
        pcie = f", pcie {nbytes(cpu.pcie[0])}/s out {nbytes(cpu.pcie[1])}/s in"
    if len(head) + len(" · ") + len(gpu) + len(pcie) > room:
        pcie = ""
    tail = f" · {gpu}{pcie}"
    threads: list[str] = []
    for role, busy in cpu.pool or ():
        item = f"{role} {busy:.0f}%"
        if len(head) + len(" (") + len(", ".join([*threads, item])) + len(")") + len(tail) > room:
            break
        threads.append(item)
    return head + (f" ({', '.join(threads)})" if threads else "") + tail
