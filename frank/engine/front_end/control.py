"""ASGI middleware serving the front-end parts' live control on the vLLM API server.

    GET  /frank/parts          -> every API-server part's switch and counters
    GET  /frank/parts/NAME     -> one part
    POST /frank/parts/NAME     -> body {"enabled": true|false}; returns the part

Same token rule as the region cache's control (X-Frank-Token = FRANK_CONTROL_TOKEN; none set: all
refused). Engine-core parts are set at start (their knob restarts the engine), so they are not here.
The profile adds it with `--middleware frank.engine.front_end.control.PartsControlMiddleware`.
"""

from __future__ import annotations

import hmac
import json
import os
from typing import Any

from frank.engine.region_cache.control import Receive, Scope, Send, _read_body, _send_json

PREFIX = "/frank/parts"
TOKEN_HEADER = b"x-frank-token"
ENGINE_CORE_PART = "block-hash-memo"


async def _engine_core_stats(scope: Scope) -> tuple[int, dict[str, Any]]:
    """The engine-core part's counters, through vLLM's utility call to the engine core process."""
    from frank.engine.front_end.block_hash_memo import STATS_UTILITY

    client = getattr(getattr(scope.get("app"), "state", None), "engine_client", None)
    core = getattr(client, "engine_core", None)
    if core is None:
        return 503, {"error": "no engine client on this server"}
    try:
        return 200, await core.call_utility_async(STATS_UTILITY)
    except Exception as exc:  # an engine core without the plugin: the method is not there
        return 502, {"error": f"engine core: {type(exc).__name__}: {exc}"}


class PartsControlMiddleware:
    def __init__(self, app: Any, token: str | None = None) -> None:
        self.app = app
        self._token = (os.environ.get("FRANK_CONTROL_TOKEN", "") if token is None else token).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "").removeprefix(scope.get("root_path", "")).rstrip("/")
        if path != PREFIX and not path.startswith(PREFIX + "/"):
            await self.app(scope, receive, send)
            return
        status, payload = await self._handle(scope, receive, path)
        await _send_json(send, status, payload)

    async def _handle(self, scope: Scope, receive: Receive, path: str) -> tuple[int, dict[str, Any]]:
        from frank.engine.front_end.metrics import api_server_switches

        if not self._token:
            return 403, {"error": "front-end part control is off: the server has no FRANK_CONTROL_TOKEN"}
        given = dict(scope.get("headers") or []).get(TOKEN_HEADER)
        if given is None:
            return 401, {"error": "missing X-Frank-Token header"}
        if not hmac.compare_digest(given, self._token):
            return 403, {"error": "wrong X-Frank-Token"}
        switches = {s.name: s for s in api_server_switches()}
        method = scope.get("method", "GET")
        if path == PREFIX:
            if method != "GET":
                return 405, {"error": f"method {method} not allowed on {path}"}
            return 200, {"parts": [s.snapshot() for s in switches.values()]}
        name = path[len(PREFIX) + 1 :]
        switch = switches.get(name)
        if name == ENGINE_CORE_PART:
            if method != "GET":
                return 405, {"error": f"{name} is set at start (a restart knob): only GET"}
            return await _engine_core_stats(scope)
        if switch is None:
            return 404, {"error": f"no live front-end part {name!r} (live: {', '.join(switches)})"}
        if method == "GET":
            return 200, switch.snapshot()
        if method != "POST":
            return 405, {"error": f"method {method} not allowed on {path}"}
        try:
            body = json.loads(await _read_body(receive) or b"{}")
        except ValueError as exc:
            return 400, {"error": f"body: {exc}"}
        if not isinstance(body, dict) or not isinstance(body.get("enabled"), bool):
            return 400, {"error": 'body: expected {"enabled": true|false}'}
        switch.set_enabled(body["enabled"])
        return 200, switch.snapshot()
