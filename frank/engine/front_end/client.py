"""The controller's client for the front-end parts' live control (served by control.PartsControlMiddleware)."""

from __future__ import annotations

from typing import Any

import httpx

from frank.errors import FrankError

PATH = "/frank/parts"


class PartsClient:
    def __init__(self, base_url: str, token: str, timeout_s: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"X-Frank-Token": token}
        self._timeout = timeout_s

    def parts(self) -> list[dict[str, Any]]:
        return self._call("GET", PATH)["parts"]

    def part(self, name: str) -> dict[str, Any]:
        return self._call("GET", f"{PATH}/{name}")

    def set_enabled(self, name: str, enabled: bool) -> dict[str, Any]:
        return self._call("POST", f"{PATH}/{name}", {"enabled": bool(enabled)})

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        url = self.base_url + path
        try:
            response = httpx.request(method, url, json=body, headers=self._headers, timeout=self._timeout)
        except httpx.HTTPError as exc:
            raise FrankError(f"front-end part control {method} {url}: {exc}") from None
        try:
            payload = response.json()
        except ValueError:
            payload = {"error": response.text[:200]}
        if response.status_code == 404 and "no live front-end part" not in str(payload.get("error", "")):
            raise FrankError(
                f"front-end part control {url}: 404 (is the engine started with "
                "--middleware frank.engine.front_end.control.PartsControlMiddleware?)"
            )
        if response.status_code != 200:
            raise FrankError(
                f"front-end part control {method} {url}: HTTP {response.status_code}: {payload.get('error', payload)}"
            )
        return payload
