"""The token-guarded ASGI middleware that serves frank's live controls on the vLLM API server (the region
cache's and the front-end parts'): one home for the token rule, the body reader and the JSON reply.

Every request under a control's prefix needs `X-Frank-Token: <FRANK_CONTROL_TOKEN>`: missing -> 401,
wrong -> 403, and everything is refused (403) when the server was started without a token. Every other path
passes through untouched. Plain ASGI (no starlette import) so it stays testable anywhere; it is loaded inside
the API server, so it imports only the standard library.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

TOKEN_HEADER = b"x-frank-token"
MAX_BODY = 4096

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Reply = tuple[int, dict[str, Any]]


class TokenControlMiddleware:
    """A control under `prefix`; subclasses answer an authorised request in `answer`."""

    prefix = ""
    what = "control"  # named in the refusal when the server has no token

    def __init__(self, app: Callable[..., Awaitable[None]], token: str | None = None) -> None:
        self.app = app
        self._token = (os.environ.get("FRANK_CONTROL_TOKEN", "") if token is None else token).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "").removeprefix(scope.get("root_path", "")).rstrip("/")
        if path != self.prefix and not path.startswith(self.prefix + "/"):
            await self.app(scope, receive, send)
            return
        refused = self._refusal(scope)
        status, payload = refused or await self.answer(scope, receive, path, scope.get("method", "GET"))
        await send_json(send, status, payload)

    def _refusal(self, scope: Scope) -> Reply | None:
        if not self._token:
            return 403, {"error": f"{self.what} is off: the server has no FRANK_CONTROL_TOKEN"}
        given = dict(scope.get("headers") or []).get(TOKEN_HEADER)
        if given is None:
            return 401, {"error": "missing X-Frank-Token header"}
        if not hmac.compare_digest(given, self._token):
            return 403, {"error": "wrong X-Frank-Token"}
        return None

    async def answer(self, scope: Scope, receive: Receive, path: str, method: str) -> Reply:
        raise NotImplementedError


async def read_enabled(receive: Receive) -> bool | Reply:
    """The body `{"enabled": true|false}`: the flag, or the 400 reply that says what is wrong."""
    try:
        body = json.loads(await read_body(receive) or b"{}")
    except ValueError as exc:
        return 400, {"error": f"body: {exc}"}
    if not isinstance(body, dict) or not isinstance(body.get("enabled"), bool):
        return 400, {"error": 'body: expected {"enabled": true|false}'}
    return bool(body["enabled"])


async def read_body(receive: Receive) -> bytes:
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


async def send_json(send: Send, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload, sort_keys=True).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
