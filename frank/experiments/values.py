"""A measured value as a record or a results CSV gives it, typed where it is read: a finite number of its
measure's sign and unit (a time is never negative, a count is whole). Each measure's unit is here, once;
tests/unit/test_sealed_records.py checks that every measure a design can name has one."""

from __future__ import annotations

import math
from typing import Any

SECONDS = "seconds"
# measure -> (unit, whole): the unit says the sign (none of frank's measures is ever negative)
UNITS: dict[str, tuple[str, bool]] = {
    "time_per_verify_step": (SECONDS, False),
    "front_end_per_draw": (SECONDS, False),
    "total_replay_time": (SECONDS, False),
    "client_time_per_draw": (SECONDS, False),
    "cpu_expert_wait_per_step": (SECONDS, False),
    "episode_total_time": (SECONDS, False),
    "tokens_per_s": ("tokens per second", False),
    "episodes_passed": ("episodes", True),
    "fidelity": ("nats of KL divergence", False),  # a start's KL on a set (`fidelity:SET` rows)
    "fidelity_floor": ("nats of KL divergence", False),
    "check": ("a check's outcome (1 passed, 0 failed)", True),
}


def unit_of(measure: str) -> tuple[str, bool] | None:
    """The unit of a measure (`fidelity:SET` is a KL); None for a name frank does not define (an external
    design's own measure: it is only finite)."""
    return UNITS.get(measure.split(":", 1)[0] if ":" in measure else measure)


def value_problem(measure: str, value: Any) -> str | None:
    """Why `value` cannot be a value of `measure` (None: it can). Booleans and strings are not numbers."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"expected a number, got {value!r}"
    if not math.isfinite(value):
        return f"{value} is not a finite number"
    unit = unit_of(measure)
    if unit is None:
        return None
    name, whole = unit
    if value < 0:
        return f"{value:g} is negative; {measure} is {name}, never negative"
    if whole and value != int(value):
        return f"{value:g} is not a whole number; {measure} counts {name}"
    return None
