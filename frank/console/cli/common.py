"""Small helpers shared by the CLI sub-commands."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, Protocol, TypeVar


def emit(as_json: bool, payload: dict[str, Any], human: Callable[[dict[str, Any]], str] | None = None) -> None:
    """Print one JSON object (with --json) or the human form of the same payload."""
    if as_json:
        json.dump(payload, sys.stdout, indent=2, sort_keys=True, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write((human(payload) if human else json.dumps(payload, indent=2, default=str)) + "\n")
    sys.stdout.flush()


class Record(Protocol):
    """A typed result: its JSON is `to_json()`."""

    def to_json(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=Record)


def emit_record(as_json: bool, record: R, human: Callable[[R], str]) -> None:
    """Print a typed result: its `to_json()` with --json, else its human form read from its fields."""
    if as_json:
        emit(True, record.to_json())
    else:
        sys.stdout.write(human(record) + "\n")
        sys.stdout.flush()


def parse_key_values(items: list[str] | None, what: str = "knob") -> dict[str, str]:
    """Parse NAME=VALUE items; a malformed one raises FrankError naming it."""
    from frank.errors import FrankError

    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise FrankError(f"--{what} {item!r}: expected NAME=VALUE")
        out[name.strip()] = value.strip()
    return out
