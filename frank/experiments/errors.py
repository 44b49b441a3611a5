"""Errors of registered runs (a module of its own so registry, cell and runner share it without a cycle)."""

from __future__ import annotations

from frank.errors import FrankError


class RunError(FrankError):
    pass


class ResultsError(FrankError):
    """Results that cannot be analyzed as the design says (a results CSV's row, a count of starts)."""
