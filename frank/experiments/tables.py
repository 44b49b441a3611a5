"""Validation of a design's TOML tables: typed getters whose errors name the file and `table.field`.

A module of its own so the design and the tables it delegates ([fidelity], [episodes]) share it without a cycle.
"""

from __future__ import annotations

from typing import Any

from frank.errors import FrankError


class DesignError(FrankError, ValueError):
    """A design file is wrong; the message names the file and the field."""


class Table:
    """One TOML table being validated: typed getters whose errors name `prefix.key`."""

    def __init__(self, data: Any, prefix: str, where: str, known: tuple[str, ...]) -> None:
        self.where, self.prefix = where, prefix
        if not isinstance(data, dict):
            raise self.error("", "expected a table")
        self.data = data
        for key in data:
            if key not in known:
                raise self.error(key, f"unknown field (known: {', '.join(known)})")

    def path(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix and key else (self.prefix or key)

    def error(self, key: str, message: str) -> DesignError:
        return DesignError(f"{self.where}: {self.path(key)}: {message}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ..., *, what: str = "") -> Any:
        if key not in self.data:
            if default is ...:
                raise self.error(key, "missing required field")
            return default
        value = self.data[key]
        bad_bool = isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))
        if bad_bool or not isinstance(value, kind):
            raise self.error(key, f"expected {what or _kind_name(kind)}, got {value!r}")
        return value

    def choice(self, key: str, choices: tuple[str, ...], default: Any = ...) -> Any:
        value = self.get(key, str, default)
        if value is not None and value not in choices:
            raise self.error(key, f"{value!r} is not one of: {', '.join(choices)}")
        return value

    def count(self, key: str, default: Any = ..., minimum: int = 1, maximum: int | None = None) -> Any:
        value = self.get(key, int, default, what="an integer")
        if value is not None and value < minimum:
            raise self.error(key, f"must be at least {minimum}, got {value}")
        if value is not None and maximum is not None and value > maximum:
            raise self.error(key, f"must be at most {maximum}, got {value} (docs/experiments.md, Bounds)")
        return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {
        int: "an integer",
        float: "a number",
        str: "a string",
        dict: "a table",
        list: "an array",
        bool: "true or false",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)
