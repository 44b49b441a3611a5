"""The controller's client for the front-end parts' live control (served by control.PartsControlMiddleware)."""

from __future__ import annotations

from typing import Any, cast

from frank.engine.control_client import ControlClient
from frank.plugins.front_end.switch import SwitchSnapshot

PATH = "/frank/parts"


class PartsClient(ControlClient):
    what = "front-end part control"
    middleware = "frank.plugins.front_end.control.PartsControlMiddleware"

    def not_found_is_ours(self, payload: dict[str, Any]) -> bool:
        return "no live front-end part" in str(payload.get("error", ""))

    def parts(self) -> list[dict[str, Any]]:
        value: list[dict[str, Any]] = self.call("GET", PATH)["parts"]
        return value

    def part(self, name: str) -> SwitchSnapshot:
        return cast(SwitchSnapshot, self.call("GET", f"{PATH}/{name}"))

    def set_enabled(self, name: str, enabled: bool) -> SwitchSnapshot:
        return cast(SwitchSnapshot, self.call("POST", f"{PATH}/{name}", {"enabled": bool(enabled)}))

    def set_fault(self, name: str, fault: str | None) -> SwitchSnapshot:
        """Break the part on purpose (a fault it knows), or clear it with None: for the revert loop's test."""
        return cast(SwitchSnapshot, self.call("POST", f"{PATH}/{name}/fault", {"fault": fault}))
