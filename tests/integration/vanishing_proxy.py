"""VanishingEngineProxy: a FAKE fault in front of the real engine, for `frank episodes` tests.

It relays TCP to the shared embedded engine untouched until the Nth chat-completions request has been
sent, then "dies": it closes its listening socket and every connection, as a crashed engine would look to
the client. `revive()` listens again on the same port, as a restarted engine would. The tests use it
because the session's one real engine must not be killed (a restart of our own costs one to two minutes
of this machine's two cores); the same fault against a real kill -9 of an engine was checked by hand
(see the episodes report).
"""

from __future__ import annotations

import socket
import threading


class VanishingEngineProxy:
    def __init__(self, upstream_port: int, die_on_request: int) -> None:
        self.upstream_port = upstream_port
        self.die_on_request = die_on_request
        self.requests = 0
        self.dead = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.port = 0
        self._listen()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _listen(self) -> None:
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", self.port))
        self.port = self._server.getsockname()[1]
        self._server.listen(16)
        self.dead = False
        threading.Thread(target=self._accept, args=(self._server,), daemon=True).start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            if self.dead or server is not self._server:
                client.close()
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if from_client and b"POST /v1/chat/completions" in data:
                    with self._lock:
                        self.requests += 1
                        dying = self.requests >= self.die_on_request and not self.dead
                    if dying:
                        self.die()
                        return
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def die(self) -> None:
        with self._lock:
            self.dead = True
            sockets, self._sockets = self._sockets, []
        try:
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(); close() alone does not
        except OSError:
            pass
        self._server.close()
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def revive(self) -> None:
        self.die_on_request = 10**9
        self._listen()

    def close(self) -> None:
        self.die()
