"""ASGI middleware that serves the region cache's live control on the vLLM API server.

    GET  /frank/region-cache        -> stats and the switch
    POST /frank/region-cache        -> body {"enabled": true|false}; returns the stats
    POST /frank/region-cache/clear  -> drops every entry; returns the stats

Every request to these paths needs `X-Frank-Token: <FRANK_CONTROL_TOKEN>`: missing -> 401, wrong -> 403,
and everything is refused (403) when the server was started without a token. Every other path passes
through untouched. The profile adds it with `--middleware frank.engine.region_cache.control.ControlMiddleware`.
Plain ASGI (no starlette import) so it stays testable anywhere.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

from frank.engine.region_cache import runtime

PREFIX = "/frank/region-cache"
TOKEN_HEADER = b"x-frank-token"
MAX_BODY = 4096

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class ControlMiddleware:
    def __init__(self, app: Callable[..., Awaitable[None]], token: str | None = None) -> None:
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
        if not self._token:
            return 403, {"error": "region cache control is off: the server has no FRANK_CONTROL_TOKEN"}
        given = dict(scope.get("headers") or []).get(TOKEN_HEADER)
        if given is None:
            return 401, {"error": "missing X-Frank-Token header"}
        if not hmac.compare_digest(given, self._token):
            return 403, {"error": "wrong X-Frank-Token"}
        method = scope.get("method", "GET")
        if path == PREFIX and method == "GET":
            return 200, runtime.snapshot()
        if path == PREFIX and method == "POST":
            try:
                body = json.loads(await _read_body(receive) or b"{}")
            except ValueError as exc:
                return 400, {"error": f"body: {exc}"}
            if not isinstance(body, dict) or not isinstance(body.get("enabled"), bool):
                return 400, {"error": 'body: expected {"enabled": true|false}'}
            runtime.set_enabled(body["enabled"])
            return 200, runtime.snapshot()
        if path == PREFIX + "/clear" and method == "POST":
            runtime.clear()
            return 200, runtime.snapshot()
        if path in (PREFIX, PREFIX + "/clear"):
            return 405, {"error": f"method {method} not allowed on {path}"}
        return 404, {"error": f"no such control path {path}"}


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message.get("type") != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            raise ValueError(f"larger than {MAX_BODY} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _send_json(send: Send, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload, sort_keys=True).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
