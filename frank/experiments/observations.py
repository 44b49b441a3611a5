"""What the analysis reads: one measured value of a start, from a run's journal or a results CSV."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from frank.experiments.fidelity import CellFidelity

ALL_PROMPTS = "every request (one digest per start)"  # the key of a CSV row's prompt-ID digest


@dataclass(frozen=True)
class Observation:
    start: int  # 1-based start order
    block: int | None
    arm: str
    value: float
    measure: str = ""
    failed_requests: int | None = None
    prompt_hashes: dict[str, str | None] | None = None
    checks: dict[str, bool] = field(default_factory=dict)
    output_hashes: dict[str, str | None] | None = None
    fidelity: CellFidelity | None = None  # a cell's fidelity result (frank/experiments/fidelity.py)
    failures: tuple[str, ...] = ()  # the engine's own words for the start's first failed requests
