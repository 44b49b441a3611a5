"""The controller's client for the region cache's live control (served by control.ControlMiddleware)."""

from __future__ import annotations

from typing import cast

from frank.engine.control_client import ControlClient
from frank.plugins.region_cache.core import RegionCacheStats

PATH = "/frank/region-cache"


class RegionCacheClient(ControlClient):
    what = "region cache control"
    middleware = "frank.plugins.region_cache.control.ControlMiddleware"

    def stats(self) -> RegionCacheStats:
        """The cache's counters and whether it is on."""
        return cast(RegionCacheStats, self.call("GET", PATH))

    def set_enabled(self, enabled: bool) -> RegionCacheStats:
        return cast(RegionCacheStats, self.call("POST", PATH, {"enabled": bool(enabled)}))

    def clear(self) -> RegionCacheStats:
        return cast(RegionCacheStats, self.call("POST", PATH + "/clear"))
