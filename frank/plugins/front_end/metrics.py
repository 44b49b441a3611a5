"""frank:front_end_* series on the API server's /metrics: one counter per part and count, one switch gauge."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger(__name__)
_switches: list[Any] = []  # the API-server parts installed in this process, in the order they registered
_registered = False


def api_server_switches() -> list[Any]:
    """The switches of the parts installed in this API server (the only ones this process can see)."""
    return list(_switches)


class FrontEndCollector:
    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        counts = CounterMetricFamily(
            "frank:front_end_events",
            "front-end part events (tail, fallback_*, verified, mismatches, errors, ...)",
            labels=["part", "event"],
        )
        enabled = GaugeMetricFamily("frank:front_end_enabled", "1 when the part is on", labels=["part"])
        for switch in api_server_switches():
            snap = switch.snapshot()
            for event, value in sorted(snap["counts"].items()):
                counts.add_metric([switch.name, event], float(value))
            enabled.add_metric([switch.name], 1.0 if snap["enabled"] else 0.0)
        yield counts
        yield enabled

    def describe(self) -> Iterator[Any]:
        return iter(())  # collect() runs only on scrapes, never at register time


def register_metrics(switch: Any) -> None:
    """A part installed in this API server: its switch joins the control and the /metrics series (the
    collector itself is registered once)."""
    global _registered
    if all(s is not switch for s in _switches):
        _switches.append(switch)
    from frank.plugins import compat

    compat.register_metrics()  # frank:plugin_compatible{part}: every part's verdict on this vLLM
    if _registered:
        return
    try:
        from prometheus_client import REGISTRY

        REGISTRY.register(FrontEndCollector())
        _registered = True
    except Exception:
        logger.exception("frank front end: /metrics series not registered")
