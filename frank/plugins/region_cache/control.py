"""ASGI middleware that serves the region cache's live control on the vLLM API server.

    GET  /frank/region-cache        -> stats and the switch, and `compat`: the versions the cache was verified
                                       on and whether this vLLM is one of them (`refused` says why not)
    POST /frank/region-cache        -> body {"enabled": true|false}; returns the stats (409 when refused)
    POST /frank/region-cache/clear  -> drops every entry; returns the stats

The token rule and the plumbing are frank.plugins.control_asgi's. The profile adds it with
`--middleware frank.plugins.region_cache.control.ControlMiddleware`.
"""

from __future__ import annotations

from frank.plugins.control_asgi import Receive, Reply, Scope, TokenControlMiddleware, read_enabled
from frank.plugins.region_cache import runtime

PREFIX = "/frank/region-cache"


class ControlMiddleware(TokenControlMiddleware):
    prefix = PREFIX
    what = "region cache control"

    async def answer(self, scope: Scope, receive: Receive, path: str, method: str) -> Reply:
        if path == PREFIX and method == "GET":
            return 200, dict(runtime.snapshot())
        if path == PREFIX and method == "POST":
            enabled = await read_enabled(receive)
            if not isinstance(enabled, bool):
                return enabled
            try:
                runtime.set_enabled(enabled)
            except runtime.Refused as exc:
                return 409, {**runtime.snapshot(), "error": str(exc)}
            return 200, dict(runtime.snapshot())
        if path == PREFIX + "/clear" and method == "POST":
            runtime.clear()
            return 200, dict(runtime.snapshot())
        if path in (PREFIX, PREFIX + "/clear"):
            return 405, {"error": f"method {method} not allowed on {path}"}
        return 404, {"error": f"no such control path {path}"}
