"""The recording proxy: an OpenAI-compatible pass-through that writes every chat-completions request it
forwards into the workload format, so users can record their own agent sessions and replay them.

stdlib asyncio streams + h11 on the client side, httpx on the upstream side (both already console deps).
Bodies are relayed as raw bytes as they arrive (streaming included; nothing is re-encoded), the client's
headers (its API key included) are forwarded minus hop-by-hop ones, and the recorder binds loopback unless
told otherwise. A request is recorded once its answer has been relayed in full with status 2xx: one
flushed line in the session's draw file, then the manifest is rewritten with the running sha256, so a
Ctrl-C (or a kill between requests) loses nothing already answered. Each recorder session is one new
draw of the workload at `out`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h11
import httpx

from frank.errors import FrankError
from frank.paths import private_dir
from frank.workloads.format import MANIFEST, DrawFile, DrawWriter, body_errors, read_manifest, write_manifest

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def forward_headers(raw: list[tuple[bytes, bytes]], api_key: str | None = None) -> list[tuple[str, str]]:
    """The client's headers for the upstream: its own API key kept, hop-by-hop headers dropped, and
    `api_key` added only when the client sent no Authorization header."""
    headers = [
        (k.decode("latin-1"), v.decode("latin-1")) for k, v in raw if k.decode("latin-1").lower() not in HOP_BY_HOP
    ]
    if api_key and not any(k.lower() == "authorization" for k, _ in headers):
        headers.append(("Authorization", f"Bearer {api_key}"))
    return headers


@dataclass
class _Episode:
    id: str
    task: str
    messages: list[Any]
    turn: int


class Recorder:
    def __init__(
        self,
        upstream: str,
        out: Path | str,
        host: str = "127.0.0.1",
        port: int = 0,
        name: str | None = None,
        api_key: str | None = None,
        allow_remote: bool = False,
        on_record: Callable[[dict[str, Any]], None] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        if host not in LOOPBACK and not allow_remote:
            raise FrankError(
                f"--listen {host}: the recorder binds loopback only unless --allow-remote is given "
                "(it forwards your API key and records prompts)"
            )
        self.upstream = upstream.rstrip("/")
        self.out = Path(out).expanduser()
        self.host, self.port = host, port
        self.api_key = api_key
        self.on_record = on_record  # called with each record once it is on disk (live progress)
        self.task_hint: str | None = None  # set by a harness that knows the task: names new conversations
        self.recorded = 0
        self.forwarded = 0
        self._server: asyncio.base_events.Server | None = None
        self._client: httpx.AsyncClient | None = None
        self._t0: float | None = None
        self._episodes: list[_Episode] = []
        self._tasks: dict[str, str] = {}
        self._lock = asyncio.Lock()
        self._writers: set[asyncio.StreamWriter] = set()
        self._prepare(name, meta or {})

    # -- the workload being written -----------------------------------------------------------------
    def _prepare(self, name: str | None, meta: dict[str, Any]) -> None:
        """Open the workload (a new one, or one already there to add a draw to); `meta` joins its manifest's
        meta (what a harness knows of the requests, such as the suite version an episode run graded)."""
        private_dir(self.out)
        if (self.out / MANIFEST).exists():
            existing = read_manifest(self.out)
            self.name, self.description, self.meta = existing.name, existing.description, dict(existing.meta)
            self.draws = list(existing.draws)
        else:
            self.name = name or self.out.name
            self.description = f"Recorded through `frank record` from {self.upstream}"
            self.meta = {"source": "record", "upstream": self.upstream}
            self.draws = []
        self.meta.update(meta)
        taken = {d.name for d in self.draws} | {p.stem for p in self.out.glob("*.jsonl")}
        k = len(self.draws) + 1
        while f"draw-{k}" in taken:
            k += 1
        self.draw_name = f"draw-{k}"
        self.writer = DrawWriter(self.out / f"{self.draw_name}.jsonl", self.draw_name)
        self._write_manifest()

    def _write_manifest(self) -> None:
        write_manifest(self.out, self.name, self.description, [*self.draws, self.writer.draw_file()], self.meta)

    def _record(self, body: dict[str, Any], started: float, status: int, duration_s: float) -> None:
        messages = body["messages"]
        match = None
        for ep in reversed(self._episodes):
            if len(ep.messages) < len(messages) and messages[: len(ep.messages)] == ep.messages:
                match = ep
                break
        if match is None:
            opening = json.dumps(messages[:2], sort_keys=True)
            task = self.task_hint or self._tasks.setdefault(opening, f"task-{len(self._tasks) + 1}")
            match = _Episode(f"{self.draw_name}-ep{len(self._episodes) + 1}", task, messages, 0)
            self._episodes.append(match)
        match.messages, match.turn = messages, match.turn + 1
        self._t0 = started if self._t0 is None else self._t0
        record = {
            "id": f"{self.draw_name}-{self.writer.count + 1:05d}",
            "task": match.task,
            "episode": match.id,
            "turn": match.turn,
            "offset_s": round(started - self._t0, 3),
            "body": body,
            "recorded": {"status": status, "duration_s": round(duration_s, 4)},
        }
        self.writer.write(record)
        self._write_manifest()
        self.recorded += 1
        if self.on_record is not None:
            self.on_record(record)

    # -- serving ------------------------------------------------------------------------------------
    async def start(self) -> tuple[str, int]:
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=10.0), limits=httpx.Limits(max_keepalive_connections=8)
        )
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        sock = self._server.sockets[0].getsockname()
        self.port = sock[1]
        return self.host, self.port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):  # kept-alive client connections end too (server.close() keeps them)
                writer.close()
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            except TimeoutError:
                pass
        if self._client is not None:
            await self._client.aclose()
        self._write_manifest()
        self.writer.close()

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        self._writers.add(writer)
        try:
            while True:
                request, body = await self._read_request(conn, reader)
                if request is None:
                    break
                await self._forward(conn, writer, request, body)
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    break
                try:
                    conn.start_next_cycle()
                except h11.LocalProtocolError:
                    break
        except (ConnectionError, h11.ProtocolError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader
    ) -> tuple[h11.Request | None, bytes]:
        request: h11.Request | None = None
        chunks: list[bytes] = []
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                conn.receive_data(data)
                if not data and request is None:
                    return None, b""
                continue
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return request, b"".join(chunks)
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None, b""

    async def _forward(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, request: h11.Request, body: bytes
    ) -> None:
        assert self._client is not None
        target = request.target.decode("latin-1")
        headers = forward_headers(request.headers, self.api_key)
        method = request.method.decode("ascii")
        started, t0 = time.time(), time.perf_counter()
        try:
            upstream_req = self._client.build_request(method, self.upstream + target, headers=headers, content=body)
            resp = await self._client.send(upstream_req, stream=True)
        except httpx.HTTPError as exc:
            msg = json.dumps(
                {
                    "error": {
                        "message": f"frank record: upstream {self.upstream} failed: {exc}",
                        "type": "upstream_error",
                    }
                }
            ).encode()
            writer.write(
                conn.send(
                    h11.Response(
                        status_code=502,
                        headers=[("content-type", "application/json"), ("content-length", str(len(msg)))],
                    )
                )
            )
            writer.write(conn.send(h11.Data(data=msg)))
            writer.write(conn.send(h11.EndOfMessage()))
            await writer.drain()
            return
        self.forwarded += 1
        complete = False
        try:
            out_headers = [(k, v) for k, v in resp.headers.raw if k.decode("latin-1").lower() not in HOP_BY_HOP]
            writer.write(conn.send(h11.Response(status_code=resp.status_code, headers=out_headers)))
            async for chunk in resp.aiter_raw():
                writer.write(conn.send(h11.Data(data=chunk)))
                await writer.drain()
            writer.write(conn.send(h11.EndOfMessage()))
            await writer.drain()
            complete = True
        finally:
            await resp.aclose()
        if (
            complete
            and method == "POST"
            and target.split("?")[0].rstrip("/").endswith("/chat/completions")
            and 200 <= resp.status_code < 300
        ):
            try:
                parsed = json.loads(body)
            except (json.JSONDecodeError, UnicodeDecodeError):
                return
            if not body_errors(parsed):
                async with self._lock:
                    self._record(parsed, started, resp.status_code, time.perf_counter() - t0)

    def draw_file(self) -> DrawFile:
        return self.writer.draw_file()
