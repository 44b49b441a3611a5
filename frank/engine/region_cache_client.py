"""The controller's client for the region cache's live control (served by control.ControlMiddleware)."""

from __future__ import annotations

from typing import Any

from frank.engine.control_client import ControlClient

PATH = "/frank/region-cache"


class RegionCacheClient(ControlClient):
    what = "region cache control"
    middleware = "frank.plugins.region_cache.control.ControlMiddleware"

    def stats(self) -> dict[str, Any]:
        """The cache's counters and whether it is on."""
        return self.call("GET", PATH)

    def set_enabled(self, enabled: bool) -> dict[str, Any]:
        return self.call("POST", PATH, {"enabled": bool(enabled)})

    def clear(self) -> dict[str, Any]:
        return self.call("POST", PATH + "/clear")
