"""The controller's client for the region cache's live control (served by control.ControlMiddleware)."""

from __future__ import annotations

from typing import Any

import httpx

from frank.errors import FrankError

PATH = "/frank/region-cache"


class RegionCacheClient:
    def __init__(self, base_url: str, token: str, timeout_s: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"X-Frank-Token": token}
        self._timeout = timeout_s

    def stats(self) -> dict[str, Any]:
        """The cache's counters and whether it is on."""
        return self._call("GET", PATH)

    def set_enabled(self, enabled: bool) -> dict[str, Any]:
        return self._call("POST", PATH, {"enabled": bool(enabled)})

    def clear(self) -> dict[str, Any]:
        return self._call("POST", PATH + "/clear")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        url = self.base_url + path
        try:
            response = httpx.request(method, url, json=body, headers=self._headers, timeout=self._timeout)
        except httpx.HTTPError as exc:
            raise FrankError(f"region cache control {method} {url}: {exc}") from None
        if response.status_code == 404:
            raise FrankError(
                f"region cache control {url}: 404 (is the engine started with "
                "--middleware frank.engine.region_cache.control.ControlMiddleware?)"
            )
        try:
            payload = response.json()
        except ValueError:
            payload = {"error": response.text[:200]}
        if response.status_code != 200:
            raise FrankError(
                f"region cache control {method} {url}: HTTP {response.status_code}: {payload.get('error', payload)}"
            )
        return payload
