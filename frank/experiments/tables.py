"""What the schemas of a design's tables share (frank.experiments.design_schema, the [fidelity] table of
frank.experiments.fidelity, the screen's of frank.experiments.screen): the error, the field types whose
refusals say what frank expects, and `Refusals`, which collects a file's problems and refuses them all at once.

A module of its own so the design and the tables it delegates ([fidelity]) share it without a cycle.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

from frank import tomlfile
from frank.errors import FrankError


class DesignError(FrankError, ValueError):
    """A design (or screen) file is wrong; the message names the file, the line and the field."""


def one_of(allowed: tuple[str, ...]) -> AfterValidator:
    def check(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"{value!r} is not one of: {', '.join(allowed)}")
        return value

    return AfterValidator(check)


def bounded(minimum: int, maximum: int) -> AfterValidator:
    """A count between `minimum` and `maximum` (the bounds the exact tests and the runner carry)."""

    def check(value: int) -> int:
        if value < minimum:
            raise ValueError(f"must be at least {minimum}, got {value}")
        if value > maximum:
            raise ValueError(f"must be at most {maximum}, got {value} (docs/experiments.md, Bounds)")
        return value

    return AfterValidator(check)


def _not_negative(value: Any) -> Any:
    # before the type check, so the message shows the value as written (-1, not -1.0)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        raise ValueError(f"must be 0 or more, got {value}")
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


NonNegative = Annotated[float, BeforeValidator(_not_negative)]
NonEmpty = Annotated[str, AfterValidator(_not_blank)]


class Refusals:
    """The problems of one file, each `FILE:LINE: FIELD: reason` (the line of the field, found by
    frank.tomlfile.KeyLines). `check` refuses them all at once: the schema's in the order of the file, then
    what ties fields together in the order it is checked (the first is the one the others may follow from)."""

    def __init__(self, where: str, lines: tomlfile.KeyLines | None) -> None:
        self.where, self.lines = where, lines
        self.problems: list[tomlfile.Problem] = []

    def add(self, field: tomlfile.Path_ | str, message: str) -> None:
        name = field if isinstance(field, str) else tomlfile.field_name(field)
        line = self.lines.line(field) if self.lines is not None else 0
        self.problems.append(tomlfile.Problem(self.where, line, f"{name}: {message}" if name else message))

    def validate(self, model: type[tomlfile.M], data: Any) -> tomlfile.M | None:
        """The model of `data`, or None with every refusal of the schema added."""
        found, problems = tomlfile.refusals(model, data, self.where, self.lines)
        # in the order of the file; a missing field (no line to name: 0) after the rest
        self.problems += sorted(problems, key=lambda p: (p.line == 0, p.line))
        return found

    def check(self) -> None:
        if self.problems:
            raise DesignError("\n".join(f"{tomlfile.where(p.path, p.line)}: {p.reason}" for p in self.problems))
