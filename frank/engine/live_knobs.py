"""Handlers for knobs applied to a running engine without a restart (`apply = "live"`).

A live knob's `target` names its handler here. Each handler talks to the engine with its control token.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from frank.engine.profiles import Knob
from frank.errors import FrankError


def _region_cache(value: Any, url: str, token: str) -> None:
    from frank.engine.region_cache_client import RegionCacheClient

    RegionCacheClient(url, token).set_enabled(str(value).lower() == "on")


def _front_end_part(part: str) -> Callable[[Any, str, str], None]:
    def handler(value: Any, url: str, token: str) -> None:
        from frank.engine.parts_client import PartsClient

        PartsClient(url, token).set_enabled(part, str(value).lower() == "on")

    return handler


HANDLERS: dict[str, Callable[[Any, str, str], None]] = {
    "region_cache": _region_cache,
    "detok_tail": _front_end_part("detok-tail"),
    "held_prompt": _front_end_part("held-prompt"),
}


def apply_live(knob: Knob, value: Any, url: str, token: str) -> None:
    handler = HANDLERS.get(knob.target)
    if handler is None:
        raise FrankError(f"knob {knob.name}: no live handler named {knob.target!r} (known: {', '.join(HANDLERS)})")
    handler(value, url, token)
