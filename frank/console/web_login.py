"""The browser console's login when it leaves loopback (`frank serve --allow-remote`), as Jupyter's: one
token, generated at start (or read from a 0600 file), that every request must carry. A browser opens
`/?token=TOKEN` once: the token is checked, set as an HttpOnly, SameSite=Strict cookie, and the browser is
sent on to `/` so the token does not stay in its address bar or history. Anything else without the token,
the page, its scripts and the websocket alike, gets 401 and nothing of the console.

The token is never on a command line (it would show in process listings) nor in a log: the server's
access log is off (it would log the query string), and a generated token is written to a 0600 file under
the state dir; it is printed only to a terminal, once.
"""

from __future__ import annotations

import secrets
import ssl
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from textual_serve.server import Server

from frank import paths, readfile
from frank.errors import FrankError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

COOKIE = "frank_serve_token"


def read_token_file(path: Path) -> str:
    """The token in a file only its owner can read (refused otherwise, naming the file)."""
    try:
        st = path.stat()
    except OSError as exc:
        raise FrankError(f"{path}: cannot read the token: {exc.strerror or exc}") from None
    text = readfile.read_text(path, readfile.TEXT, FrankError).strip()
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise FrankError(f"{path}: the token file is mode {stat.S_IMODE(st.st_mode):o}; make it 0600 (chmod 600)")
    if len(text) < 16 or any(c.isspace() for c in text):
        raise FrankError(f"{path}: the token must be one word of at least 16 characters")
    return text


def new_token() -> tuple[str, Path]:
    """A fresh token, written to a 0600 file under the state dir (where a second shell can read it)."""
    token = secrets.token_urlsafe(32)
    path = paths.state_dir() / "serve-token"
    paths.write_private(path, token + "\n")
    return token, path


def tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    for path in (cert, key):  # PEM text of a few KB: OpenSSL itself would read /dev/zero until memory ends
        readfile.read_text(path, readfile.TEXT, FrankError)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise FrankError(f"--tls-cert {cert} --tls-key {key}: {getattr(exc, 'strerror', None) or exc}") from None
    return context


class LoginServer(Server):
    """textual-serve's server behind the token check, with TLS when given a context."""

    def __init__(self, *args: Any, token: str, tls: ssl.SSLContext | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.token, self.tls = token, tls

    def _allowed(self, request: web.Request) -> bool:
        given = request.cookies.get(COOKIE, "")
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            given = auth.removeprefix("Bearer ")
        return bool(given) and secrets.compare_digest(given.encode(), self.token.encode())

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()

        @web.middleware
        async def login(request: web.Request, handler: Handler) -> web.StreamResponse:
            offered = request.query.get("token")
            if offered is not None and secrets.compare_digest(offered.encode(), self.token.encode()):
                found = web.HTTPFound(request.rel_url.without_query_params("token"))
                found.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict", secure=self.tls is not None)
                raise found
            if not self._allowed(request):
                return web.Response(
                    status=401,
                    text="401: frank serve needs its token: open the URL it printed at start (/?token=...)\n",
                )
            return await handler(request)

        app.middlewares.append(login)
        return app

    def serve(self, debug: bool = False) -> None:
        """As textual-serve's, with TLS and without the access log (it would log the token's query)."""
        import asyncio
        import signal

        self.debug = debug
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.request_exit)
        web.run_app(
            self._make_app(),
            host=self.host,
            port=self.port,
            ssl_context=self.tls,
            access_log=None,
            handle_signals=False,
            loop=loop,
            print=lambda *args: None,
        )
