"""The controller's side of frank's token-guarded live controls on the API server (frank.plugins.control_asgi):
one request helper, so every control reports a missing middleware and a refusal the same way."""

from __future__ import annotations

from typing import Any

import httpx

from frank.errors import FrankError


class ControlClient:
    what = "control"  # named in every error
    middleware = ""  # the --middleware a 404 most likely means is missing

    def __init__(self, base_url: str, token: str, timeout_s: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"X-Frank-Token": token}
        self._timeout = timeout_s

    def not_found_is_ours(self, payload: dict[str, Any]) -> bool:
        """A 404 the control itself answered (rather than a server without the middleware)."""
        return False

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        url = self.base_url + path
        try:
            response = httpx.request(method, url, json=body, headers=self._headers, timeout=self._timeout)
        except httpx.HTTPError as exc:
            raise FrankError(f"{self.what} {method} {url}: {exc}") from None
        try:
            payload = response.json()
        except ValueError:
            payload = {"error": response.text[:200]}
        if response.status_code == 404 and not self.not_found_is_ours(payload):
            raise FrankError(f"{self.what} {url}: 404 (is the engine started with --middleware {self.middleware}?)")
        if response.status_code != 200:
            raise FrankError(
                f"{self.what} {method} {url}: HTTP {response.status_code}: {payload.get('error', payload)}"
            )
        value: dict[str, Any] = payload
        return value
