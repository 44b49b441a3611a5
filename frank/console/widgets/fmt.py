"""Small text helpers shared by the widgets: sparklines, durations, sizes, rates.

Sparklines are drawn as block characters in one Text run (not one widget per series): cheap to render,
readable without colour, and they fit in an 80-column panel.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

BLOCKS = "▁▂▃▄▅▆▇█"


def spark(values: Iterable[float | None], width: int, lo: float | None = None, hi: float | None = None) -> str:
    """The last `width` values as block characters; a missing value is a blank. Scaled lo..hi."""
    vals = list(values)[-width:] if width > 0 else []
    nums = [v for v in vals if v is not None and not math.isnan(v)]
    if not nums:
        return " " * len(vals)
    lo = min(nums) if lo is None else lo
    hi = max(nums) if hi is None else hi
    span = hi - lo
    out = []
    for v in vals:
        if v is None or math.isnan(v):
            out.append(" ")
        elif span <= 0:
            out.append(BLOCKS[3] if hi > 0 else BLOCKS[0])  # a flat series: mid height, or floor at 0
        else:
            frac = min(1.0, max(0.0, (v - lo) / span))
            out.append(BLOCKS[min(len(BLOCKS) - 1, int(frac * (len(BLOCKS) - 1) + 0.5))])
    return "".join(out)


def secs(value: float | None, digits: int = 3) -> str:
    """A duration in seconds with a unit that fits: 850 ms, 1.23 s, 2m05s, 3h12m."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if value < 0:
        return "-" + secs(-value, digits)
    if value < 1:
        return (
            f"{value * 1000:.0f} ms"
            if value >= 0.0995
            else (f"{value * 1000:.1f} ms" if value >= 0.00995 else f"{value * 1000:.2f} ms")
        )
    if value < 60:
        return f"{value:.{max(0, digits - 1)}f} s"
    if value < 3600:
        return f"{int(value // 60)}m{int(value % 60):02d}s"
    return f"{int(value // 3600)}h{int(value % 3600 // 60):02d}m"


def nbytes(value: float | None) -> str:
    if value is None:
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return "–"


def rate(value: float | None) -> str:
    """Bytes per second in three significant figures at most ("153 MiB/s", "20.0 MiB/s"): at most ten
    characters, so the GPU panel's value column always leaves a space after its label."""
    text = nbytes(value)
    number, _, unit = text.partition(" ")
    if unit and unit != "B" and abs(float(number)) >= 100:
        text = f"{float(number):.0f} {unit}"
    return "–" if value is None else text + "/s"


def pct(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:.{digits}f}%"


def num(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"
