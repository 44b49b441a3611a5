"""A /metrics server for unit tests that serves recorded real-engine text, with faults on demand."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FaultyMetricsServer:
    """Serves fixture text, but only with the right bearer token, and a 500 or garbage on demand: faults the
    real engine cannot produce on demand (its /metrics never asks for the API key)."""

    def __init__(self, body: str, token: str | None = None) -> None:
        outer = self
        self.body, self.token, self.status, self.seen_auth = body, token, 200, []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                auth = self.headers.get("Authorization")
                outer.seen_auth.append(auth)
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
