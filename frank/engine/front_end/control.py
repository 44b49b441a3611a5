"""ASGI middleware serving the front-end parts' live control on the vLLM API server.

    GET  /frank/parts          -> every API-server part's switch and counters
    GET  /frank/parts/NAME     -> one part
    POST /frank/parts/NAME     -> body {"enabled": true|false}; returns the part

Same token rule as the region cache's control (frank.engine.control_asgi: X-Frank-Token =
FRANK_CONTROL_TOKEN; none set: all refused). Engine-core parts are set at start (their knob restarts the
engine), so they are not here.
The profile adds it with `--middleware frank.engine.front_end.control.PartsControlMiddleware`.
"""

from __future__ import annotations

from typing import Any

from frank.engine.control_asgi import Receive, Reply, Scope, TokenControlMiddleware, read_enabled

PREFIX = "/frank/parts"
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


class PartsControlMiddleware(TokenControlMiddleware):
    prefix = PREFIX
    what = "front-end part control"

    async def answer(self, scope: Scope, receive: Receive, path: str, method: str) -> Reply:
        from frank.engine.front_end.metrics import api_server_switches

        switches = {s.name: s for s in api_server_switches()}
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
        enabled = await read_enabled(receive)
        if not isinstance(enabled, bool):
            return enabled
        switch.set_enabled(enabled)
        return 200, switch.snapshot()
