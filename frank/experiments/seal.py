"""Seals over the measured values of an exported record (a screen's record, a run's results CSV).

Each row of values (one canonical line) gets a seal: the first 16 hex digits of a sha256 over the seal
before it and the row; the first row's "seal before" is the design's (or screen's) hash. The record states
the last seal apart. So an edited value breaks its own row's seal, a row removed, added or moved breaks the
next row's, and a cut tail breaks the stated last seal: each refusal names its row.

A seal shows an edit; it does not stop a forger, who can compute seals as frank does. Where the run is
registered here, its journal is the source, and the values are compared with it too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence


def link(before: str, row: str) -> str:
    return hashlib.sha256(f"{before}\n{row}".encode()).hexdigest()[:16]


def chain(start: str, rows: Iterable[str]) -> list[str]:
    """The seal of each row, in order."""
    out: list[str] = []
    for row in rows:
        out.append(link(out[-1] if out else start, row))
    return out


def first_broken(start: str, rows: Sequence[str], seals: Sequence[str]) -> int | None:
    """The index of the first row whose stated seal is not the seal of its values after the stated seal
    before it; None when every row holds."""
    before = start
    for i, (row, seal) in enumerate(zip(rows, seals, strict=True)):
        if link(before, row) != seal:
            return i
        before = seal
    return None
