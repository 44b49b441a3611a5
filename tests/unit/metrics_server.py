"""A /metrics server for unit tests that serves recorded real-engine text, with faults on demand."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FaultyMetricsServer:
    """Serves fixture text, but only with the right bearer token, a 500 or garbage, or a kept-alive
    connection closed unanswered, on demand: faults the real engine cannot produce on demand (its /metrics
    never asks for the API key)."""

    def __init__(self, body: str, token: str | None = None, keep_alive_s: float | None = None) -> None:
        """`keep_alive_s`: speak HTTP/1.1 and keep a connection open until it idles that long (as uvicorn
        does); without it, HTTP/1.0 and one request a connection."""
        outer = self
        self.body, self.token, self.status, self.seen_auth = body, token, 200, []
        self.connections: list[int] = []  # the client port of each request: one per connection reused
        # this many times, a second request on a kept-alive connection is read and the connection closed
        # unanswered: an idle connection's close crossing the next GET (llama.cpp's server closes at 5 s)
        self.drop_reused = 0

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive_s else "HTTP/1.0"
            timeout = keep_alive_s

            def do_GET(self) -> None:  # noqa: N802
                reused, self.served = getattr(self, "served", False), True
                if reused and outer.drop_reused:
                    outer.drop_reused -= 1
                    self.close_connection = True
                    return
                auth = self.headers.get("Authorization")
                outer.seen_auth.append(auth)
                outer.connections.append(self.client_address[1])
                code = outer.status
                if outer.token and auth != f"Bearer {outer.token}":
                    code = 401
                payload = outer.body.encode() if code == 200 else b"no"
                self.send_response(code)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
