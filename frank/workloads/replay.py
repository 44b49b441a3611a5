"""The replay runner: recorded requests against one running engine, strictly one at a time, in order.

Each draw gets a fresh `cache_salt` (vLLM's prompt-cache namespace). Mode `engine` asks for one output token
(the seed's front-end test); mode `full` sends the recorded parameters, streamed. Around every request the
runner scrapes `/metrics` and keeps the request's own server values (frank.engine.metrics.request_delta: a delta
that cannot be attributed to exactly one request is marked, never guessed; then the response's own timings
are used when the engine returns them, frank.engine.metrics.response_values, and server["sources"] says where
each value came from) next to client timings taken
with async httpx: send, first byte, first token, end. The prompt token IDs come back in the same response
(`return_token_ids`) and are kept as a count and a sha256, so two engine starts can be compared.

Results: a run folder with run.json (what was asked), one JSONL per draw (one line per request, appended,
flushed and fsynced before the next request is sent: frank.workloads.record.ReplayRecord) and summary.json
(per-draw totals, rewritten after every request from a running tally: O(1) per request, each draw file
is read once). A run cut off by a dead engine, Ctrl-C or `stop()` keeps every record and can be resumed:
requests whose latest record is ok are skipped, the rest run again under a new attempt number and a new salt.
Progress goes to a callback as frozen `ReplayProgress` snapshots; nothing here prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from frank import jsonl, paths, readfile
from frank.engine import measures
from frank.engine.metrics import (
    afetch_metrics,
    afetch_settled,
    delta_sources,
    request_delta,
    response_values,
    spec_drafts_delta,
    timings_values,
)
from frank.errors import FrankError
from frank.telemetry.expert_pool import PoolProbe
from frank.workloads.format import Workload, WorkloadRequest, load_workload
from frank.workloads.record import (
    ClientTimes,
    DrawTally,
    DrawTotals,
    ReplayRecord,
    ReplayState,
    ReplaySummary,
    ReplayTotals,
    ServerValues,
)

if TYPE_CHECKING:
    from frank.engine.state import StateFiles

MODES = ("engine", "full")
SOURCE_POOL = "expert-pool"  # llama.cpp's pool threads' CPU times, read around the request (PoolProbe)
# exllamav3's pool: its workers spin between jobs, so their CPU time is an upper bound on the wait
SOURCE_POOL_SPIN = "expert-pool-spin"
RUN_FILE = "run.json"
SUMMARY_FILE = "summary.json"


@dataclass(frozen=True)
class ReplayOptions:
    mode: str = "engine"  # engine: max_tokens 1; full: recorded parameters, streamed
    stream: bool = True  # engine mode only; full mode always streams
    draws: tuple[str, ...] | None = None  # None: every draw of the workload
    limit: int | None = None  # replay only the first N requests of each draw
    max_tokens: int | None = None  # full mode: cap the recorded max_tokens
    model: str | None = None  # served model name; None: the engine's first /v1/models entry
    api_key: str | None = None  # sent as a bearer token to every endpoint
    token_ids: bool = True  # ask for the prompt token IDs (return_token_ids) and hash them
    timeout_s: float = 900.0  # one request, end to end
    settle_timeout_s: float = 2.0  # how long to wait for vLLM to record a finished request's histograms
    # engine mode: output tokens per request (1: the seed's front-end test). More than 1 also samples
    # greedily (temperature 0), so two engine starts must give the same outputs: their hash is recorded.
    output_tokens: int = 1

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise FrankError(f"--mode {self.mode!r}: expected one of {', '.join(MODES)}")
        if self.limit is not None and self.limit < 1:
            raise FrankError(f"--limit {self.limit}: expected 1 or more")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise FrankError(f"--max-tokens {self.max_tokens}: expected 1 or more")
        if self.output_tokens < 1:
            raise FrankError(f"output tokens {self.output_tokens}: expected 1 or more")


@dataclass(frozen=True)
class ReplayProgress:
    """One progress event for the console. phase: started, request (about to send `current`), result
    (`last` recorded), draw_done, finished, stopped, interrupted (engine gone), failed."""

    run_id: str
    run_dir: str
    phase: str
    draw: str | None
    draw_index: int  # 1-based
    draws: int
    done: int  # requests of this draw with a record in this run
    total: int  # requests of this draw to replay
    current: str | None = None  # request id in flight
    task: str | None = None
    turn: int | None = None
    last: ReplayRecord | None = field(default=None, compare=False)  # the last record written
    totals: DrawTotals | None = None
    message: str = ""


ProgressFn = Callable[[ReplayProgress], None]


def ids_sha256(ids: Iterable[int]) -> str:
    """The hash of a prompt's token IDs: sha256 of the decimal IDs joined by commas."""
    return hashlib.sha256(",".join(str(int(i)) for i in ids).encode()).hexdigest()


def output_sha256(text: str, ids: Iterable[int] | None, finish_reason: str | None) -> str:
    """The hash of what a request generated: its text, output token IDs and finish reason."""
    payload = json.dumps([text, [int(i) for i in ids] if ids is not None else None, finish_reason])
    return hashlib.sha256(payload.encode()).hexdigest()


def new_run_id(workload_name: str, mode: str) -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{workload_name}-{mode}-{secrets.token_hex(2)}"


def default_runs_root() -> Path:
    return paths.private_dir(paths.runs_dir() / "replays")


def resolve_run_dir(run: str | Path) -> Path:
    """A run id (under the replays runs folder) or a path to a run folder."""
    candidate = Path(run).expanduser()
    if (candidate / RUN_FILE).is_file():
        return candidate
    by_id = default_runs_root() / str(run)
    if (by_id / RUN_FILE).is_file():
        return by_id
    raise FrankError(f"no replay run {run!r} (looked for {candidate / RUN_FILE} and {by_id / RUN_FILE})")


def _append(path: Path, record: Mapping[str, Any]) -> None:
    jsonl.append(path, record, separators=(",", ":"))


RESTART = "__restart__"  # a marker line: records before it belong to an abandoned pass over the draw


def read_records(path: Path, current: bool = True) -> list[dict[str, Any]]:
    """The whole records of a draw's results file (frank.jsonl: a torn last line is skipped, a damaged one
    is an error). With `current`, only those after the last restart marker; the file keeps everything."""
    out: list[dict[str, Any]] = []
    for rec in jsonl.read(path):
        if "id" not in rec:
            continue
        if rec["id"] == RESTART:
            if current:
                out.clear()
            continue
        out.append(rec)
    return out


class _Unreachable(Exception):
    """The engine stopped answering (connection refused or dropped)."""


@dataclass
class _Response:
    status: int
    ttfb_s: float | None = None
    ttft_s: float | None = None
    total_s: float = 0.0
    prompt_ids: list[int] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    chunks: int = 0
    output_at_s: list[float] = field(default_factory=list)  # when each streamed event with output arrived
    metrics: dict[str, Any] | None = None  # the response's own timings (--enable-per-request-metrics)
    timings: dict[str, Any] | None = None  # llama.cpp's `timings` object
    text: list[str] = field(default_factory=list)  # generated text, chunk by chunk
    output_ids: list[int] | None = None  # generated token IDs (return_token_ids)
    # llama.cpp's thread CPU times while the request ran, one read every 20 ms (PoolProbe; empty otherwise)
    pool_timeline: list[tuple[float, dict[int, float]]] = field(default_factory=list)


# A streamed chunk that carries output: text, reasoning, a tool call, output token IDs or a finish reason.
# (`[{,]` before token_ids keeps `prompt_token_ids` of the first chunk from matching.)
_TOKEN = re.compile(
    rb'"(?:content|reasoning_content|reasoning)":"[^"]|"tool_calls":\[\{|[{,]"token_ids":\[\d'
    rb'|"finish_reason":"'
)


def _has_token(chunk: Mapping[str, Any], finish: bool = True) -> bool:
    """Whether a streamed chunk carries output (`finish`: a finish reason alone counts too)."""
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta") or {}
        if (
            choice.get("token_ids")
            or delta.get("content")
            or delta.get("reasoning_content")
            or delta.get("reasoning")
            or delta.get("tool_calls")
        ):
            return True
        if finish and choice.get("finish_reason"):
            return True
    return False


class ReplayRunner:
    """Replays a checked workload against `base_url`. Use `run()` (async) or `run_sync()`."""

    def __init__(
        self,
        workload: Workload,
        base_url: str,
        options: ReplayOptions | None = None,
        run_dir: Path | None = None,
        progress: ProgressFn | None = None,
        engine: EngineAt | None = None,
    ) -> None:
        self.workload = workload
        self.engine = engine  # default: this user's engine, if it is at base_url
        self.base_url = base_url.rstrip("/")
        self.options = options or ReplayOptions()
        self.progress = progress
        self._stop = threading.Event()
        self._tallies: dict[str, DrawTally] = {}
        names = list(self.options.draws) if self.options.draws else workload.draw_names
        for name in names:
            workload.draw(name)  # raises for an unknown draw
            if name not in workload.requests:
                raise FrankError(f"draw {name!r} of {workload.path} was not loaded (load_workload with its name)")
        self.draw_names = names
        self.run_dir = run_dir or default_runs_root() / self._new_run_id()
        self.run_id = self.run_dir.name
        self.meta: dict[str, Any] = {}
        self._probe = PoolProbe(None)  # the engine's CPU pool, read around each request (set in run())
        self._live = LiveKnobs(None)  # the engine's live knob values, read around each request (set in run())

    # -- set-up -----------------------------------------------------------------------------------
    def _new_run_id(self) -> str:
        return new_run_id(self.workload.name, self.options.mode)

    def planned(self, draw: str) -> list[WorkloadRequest]:
        reqs = list(self.workload.requests[draw])
        return reqs[: self.options.limit] if self.options.limit else reqs

    def stop(self) -> None:
        """Ask the run to stop after the request in flight (thread-safe)."""
        self._stop.set()

    def _emit(self, **kw: Any) -> None:
        if self.progress is not None:
            self.progress(ReplayProgress(run_id=self.run_id, run_dir=str(self.run_dir), **kw))

    def _write_run_file(self, model: str) -> None:
        manifest = readfile.read_bytes(self.workload.manifest_path, readfile.TOML)
        run_file = self.run_dir / RUN_FILE
        if run_file.exists():
            self.meta = readfile.read_object(run_file)
            if self.meta.get("workload", {}).get("manifest_sha256") != hashlib.sha256(manifest).hexdigest():
                raise FrankError(
                    f"{self.workload.manifest_path} changed since run {self.run_id} started; "
                    "start a new run instead of resuming"
                )
            self.meta["attempts"] = int(self.meta.get("attempts", 1)) + 1
        else:
            engine = self.engine or engine_at(self.base_url)
            self.meta = {
                "run_id": self.run_id,
                "created_at": time.time(),
                "attempts": 1,
                "workload": {
                    "name": self.workload.name,
                    "path": str(self.workload.path),
                    "manifest_sha256": hashlib.sha256(manifest).hexdigest(),
                },
                "options": {k: v for k, v in asdict(self.options).items() if k != "api_key"},
                "draws": self.draw_names,
                "engine": engine.to_json() if engine else None,
            }
        self.meta.update(base_url=self.base_url, model=model)
        paths.write_private(run_file, json.dumps(self.meta, indent=2, default=str))

    def draw_file(self, draw: str) -> Path:
        return self.run_dir / f"{draw}.jsonl"

    def forget_tally(self, draw: str) -> None:
        self._tallies.pop(draw, None)

    def tally(self, draw: str) -> DrawTally:
        """The draw's running totals: its file is read once, then each new record is added."""
        if draw not in self._tallies:
            planned = [r.id for r in self.planned(draw)]
            self._tallies[draw] = DrawTally(draw, planned).add_all(read_records(self.draw_file(draw)))
        return self._tallies[draw]

    def summary(self, state: ReplayState, error: str | None = None) -> ReplaySummary:
        draws = {d: self.tally(d).totals() for d in self.draw_names}
        return ReplaySummary(
            run_id=self.run_id,
            run_dir=str(self.run_dir),
            state=state,
            error=error,
            workload=self.meta.get("workload"),
            mode=self.options.mode,
            stream=self.options.stream or self.options.mode == "full",
            base_url=self.base_url,
            model=self.meta.get("model"),
            attempts=self.meta.get("attempts"),
            updated_at=time.time(),
            draws=draws,
            totals=ReplayTotals.over(draws.values()),
        )

    def _write_summary(self, state: ReplayState, error: str | None = None) -> ReplaySummary:
        summary = self.summary(state, error)
        paths.write_private(self.run_dir / SUMMARY_FILE, json.dumps(summary.to_json(), indent=2, default=str))
        return summary

    # -- one request --------------------------------------------------------------------------------
    def _body(self, req: WorkloadRequest, model: str, salt: str) -> dict[str, Any]:
        body = dict(req.body)
        body["model"] = model
        body["cache_salt"] = salt
        if self.options.mode == "engine":
            body["max_tokens"] = self.options.output_tokens
            body.pop("max_completion_tokens", None)
            if self.options.output_tokens > 1:
                body["temperature"] = 0.0  # greedy: two engine starts must generate the same tokens
            body["stream"] = self.options.stream
        else:
            body["stream"] = True
            if self.options.max_tokens:
                for key in ("max_tokens", "max_completion_tokens"):
                    if key in body:
                        body[key] = min(int(body[key]), self.options.max_tokens)
                if "max_tokens" not in body and "max_completion_tokens" not in body:
                    body["max_tokens"] = self.options.max_tokens
        if body["stream"]:
            body["stream_options"] = {"include_usage": True}
        else:
            body.pop("stream_options", None)
        if self.options.token_ids:
            body["return_token_ids"] = True
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.options.api_key:
            headers["Authorization"] = f"Bearer {self.options.api_key}"
        return headers

    async def _send(self, client: httpx.AsyncClient, data: bytes, streamed: bool) -> _Response:
        request = client.build_request(
            "POST",
            self.base_url + "/v1/chat/completions",
            content=data,
            headers=self._headers(),
            timeout=httpx.Timeout(self.options.timeout_s, connect=10.0),
        )
        clock = time.perf_counter
        timeline: list[tuple[float, dict[int, float]]] = []
        done = asyncio.Event()
        probe = asyncio.create_task(self._probe.record(timeline, done)) if self._probe.active else None
        t0 = clock()  # everything above (encoding, building the request) happens before the clock starts
        try:
            resp = await client.send(request, stream=True)
            out = _Response(status=resp.status_code)
            buf = b""
            events: list[bytes] = []  # parsed after the stream: a cheap byte scan finds the first token
            arrived: list[float] = []  # when each event's last bytes arrived (seconds from the send)
            try:
                async for chunk in resp.aiter_raw():
                    at = clock() - t0  # when these bytes arrived: parsing them is not in the timings
                    if out.ttfb_s is None:
                        out.ttfb_s = at
                    buf += chunk
                    if resp.status_code != 200 or not streamed:
                        continue
                    while b"\n\n" in buf:
                        event, buf = buf.split(b"\n\n", 1)
                        events.append(event)
                        arrived.append(at)
                        if out.ttft_s is None and _TOKEN.search(event):
                            out.ttft_s = at
                out.total_s = clock() - t0
            finally:
                await resp.aclose()
                await self._stop_probe(probe, done)
                out.pool_timeline = timeline
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            await self._stop_probe(probe, done)
            raise _Unreachable(f"{type(exc).__name__}: {exc}") from exc
        except httpx.TimeoutException as exc:
            await self._stop_probe(probe, done)
            return _Response(
                status=0,
                total_s=clock() - t0,
                error=f"no answer within {self.options.timeout_s:g} s ({type(exc).__name__})",
            )
        if resp.status_code != 200:
            out.error = f"HTTP {resp.status_code}: {buf[:500].decode('utf-8', 'replace')}"
            return out
        if streamed:
            events.append(buf)
            arrived.append(out.total_s)
            for event, at in zip(events, arrived):
                self._on_event(event, out, at)
        else:
            out.ttft_s = out.ttfb_s
            try:
                payload = json.loads(buf)
            except json.JSONDecodeError as exc:
                out.error = f"bad JSON in the response: {exc}"
                return out
            self._on_payload(payload, out)
        if out.ttft_s is None and out.error is None:
            out.error = "the response carried no token"
        return out

    @staticmethod
    async def _stop_probe(probe: asyncio.Task[None] | None, done: asyncio.Event) -> None:
        done.set()
        if probe is not None and not probe.done():
            await probe

    def _on_event(self, event: bytes, out: _Response, at: float) -> None:
        for line in event.splitlines():
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                continue
            try:
                payload = json.loads(data)
            except json.JSONDecodeError:
                out.error = f"bad JSON in the stream: {data[:200]!r}"
                continue
            out.chunks += 1
            if "error" in payload and not payload.get("choices"):
                out.error = f"stream error: {json.dumps(payload['error'])[:500]}"
                continue
            if out.ttft_s is None and _has_token(payload):
                out.ttft_s = out.total_s  # the byte scan missed it: count it at the end, never earlier
            if _has_token(payload, finish=False):  # a step's output (a finish reason alone is none)
                out.output_at_s.append(round(at, 6))
            self._on_payload(payload, out)

    @staticmethod
    def _on_payload(payload: Mapping[str, Any], out: _Response) -> None:
        if payload.get("prompt_token_ids") is not None and out.prompt_ids is None:
            out.prompt_ids = list(payload["prompt_token_ids"])
        if payload.get("metrics"):
            out.metrics = payload["metrics"]
        if payload.get("timings"):
            out.timings = payload["timings"]
        usage = payload.get("usage")
        if usage:
            out.prompt_tokens = usage.get("prompt_tokens", out.prompt_tokens)
            out.completion_tokens = usage.get("completion_tokens", out.completion_tokens)
        for choice in payload.get("choices") or ():
            if choice.get("finish_reason"):
                out.finish_reason = choice["finish_reason"]
            message = choice.get("delta") or choice.get("message") or {}
            for key in ("reasoning_content", "reasoning", "content"):
                if isinstance(message.get(key), str):
                    out.text.append(message[key])
            for call in message.get("tool_calls") or ():
                out.text.append(json.dumps(call.get("function") or {}, sort_keys=True))
            if choice.get("token_ids"):
                out.output_ids = (out.output_ids or []) + [int(i) for i in choice["token_ids"]]

    async def _healthy(self, client: httpx.AsyncClient) -> bool:
        try:
            resp = await client.get(self.base_url + "/health", headers=self._headers(), timeout=5.0)
            return resp.status_code == 200
        except httpx.HTTPError:
            return False

    async def _replay_one(
        self, client: httpx.AsyncClient, req: WorkloadRequest, index: int, model: str, salt: str, attempt: int
    ) -> tuple[ReplayRecord, bool]:
        """Send one request and build its record. Returns (record, engine still up)."""
        body = self._body(req, model, salt)
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")  # encoded before the clock starts
        key, name = self.options.api_key, model
        live = self._live.read()  # outside the timed part: a small file read
        before = await afetch_metrics(client, self.base_url, key, name)
        sent_at = time.time()
        sent = ReplayRecord(
            id=req.id,
            task=req.task,
            episode=req.episode,
            turn=req.turn,
            index=index,
            draw=req.draw,
            attempt=attempt,
            salt=salt,
            mode=self.options.mode,
            stream=bool(body["stream"]),
            sent_at=sent_at,
            status="failed",
            live_knobs=live,
        )
        alive = True
        try:
            resp = await self._send(client, data, bool(body["stream"]))
        except _Unreachable as exc:
            alive = await self._healthy(client)
            return replace(sent, error=f"engine unreachable: {exc}", live_knobs_end=self._live.changed(live)), alive
        ok = resp.error is None
        if ok:
            after = await afetch_settled(
                client, self.base_url, before, 1, key, name, timeout_s=self.options.settle_timeout_s
            )
        else:
            after = await afetch_metrics(client, self.base_url, key, name)
            if resp.status >= 500 or resp.status == 0:
                alive = await self._healthy(client)
        delta = request_delta(before, after)
        values, sources = delta, delta_sources(delta)
        fallback = (
            None
            if delta.attributed or not ok
            else response_values(
                resp.metrics, resp.completion_tokens, resp.prompt_tokens, resp.ttft_s, f"deltas: {delta.reason}"
            )
        )
        if fallback is None and not delta.attributed and ok:  # llama.cpp: its response's timings
            scrapes = (("before", before), ("after", after))
            unknown = "; ".join(f"/metrics {at}: {m.error}" for at, m in scrapes if m.error)
            fallback = timings_values(resp.timings, resp.ttft_s, spec_drafts_delta(before, after), unknown)
        if fallback is not None:  # more than one request finished between the scrapes: the response's own
            values, sources = fallback
        wait = measures.cpu_expert_wait_s(self._probe.decode_window(resp.pool_timeline, values.decode_s))
        if wait is not None:
            source = SOURCE_POOL_SPIN if self._probe.spin_parked else SOURCE_POOL
            sources = {**sources, "cpu_expert_wait_s": source, "cpu_expert_wait_step_s": source}
        server = ServerValues(values, sources, wait, measures.cpu_expert_wait_per_step(wait, values.decode_steps))
        return replace(
            sent,
            status="ok" if ok else "failed",
            error=resp.error,
            http_status=resp.status,
            client=ClientTimes(resp.ttfb_s, resp.ttft_s, resp.total_s, resp.chunks, tuple(resp.output_at_s) or None),
            server=server,
            response_metrics=resp.metrics,
            prompt_tokens=resp.prompt_tokens
            if resp.prompt_tokens is not None
            else (len(resp.prompt_ids) if resp.prompt_ids is not None else None),
            prompt_ids_count=len(resp.prompt_ids) if resp.prompt_ids is not None else None,
            prompt_ids_sha256=ids_sha256(resp.prompt_ids) if resp.prompt_ids is not None else None,
            completion_tokens=resp.completion_tokens,
            finish_reason=resp.finish_reason,
            output_sha256=output_sha256("".join(resp.text), resp.output_ids, resp.finish_reason) if ok else None,
            metrics_scrape_s=(before.scrape_s, after.scrape_s),
            live_knobs_end=self._live.changed(live),
        ), alive

    # -- the run ------------------------------------------------------------------------------------
    async def _model(self, client: httpx.AsyncClient) -> str:
        if self.options.model:
            return self.options.model
        try:
            resp = await client.get(self.base_url + "/v1/models", headers=self._headers(), timeout=10.0)
            resp.raise_for_status()
            return str(resp.json()["data"][0]["id"])
        except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
            raise FrankError(
                f"cannot reach the engine at {self.base_url} (/v1/models: {exc}); is it running? (frank engine status)"
            ) from exc

    async def run(self) -> ReplaySummary:
        """Replay every planned draw. Returns the summary (also written to summary.json); its `state` is
        finished, stopped, interrupted (the engine went away) or failed."""
        paths.private_dir(self.run_dir)
        limits = httpx.Limits(max_connections=2, max_keepalive_connections=2)
        async with httpx.AsyncClient(limits=limits, timeout=30.0) as client:
            model = await self._model(client)
            self._write_run_file(model)
            engine = self.engine or engine_at(self.base_url)
            self._probe = PoolProbe(engine.pid if engine else None)
            self._live = LiveKnobs(engine)
            self._write_summary("running")  # a kill from here on reads as interrupted, never as the last end
            attempt = int(self.meta["attempts"])
            state: ReplayState = "finished"
            error: str | None = None
            self._emit(
                phase="started",
                draw=None,
                draw_index=0,
                draws=len(self.draw_names),
                done=0,
                total=0,
                message=f"replaying {self.workload.name} ({self.options.mode} mode) against {self.base_url}",
            )
            try:
                for k, draw in enumerate(self.draw_names, 1):
                    state, error = await self._run_draw(client, draw, k, model, attempt)
                    if state != "finished":
                        break
            except (asyncio.CancelledError, KeyboardInterrupt):
                state, error = "stopped", "interrupted by the user"
                self._write_summary(state, error)
                raise
            except Exception as exc:  # a bug or an unexpected reply: keep what was recorded, say what happened
                state, error = "failed", f"{type(exc).__name__}: {exc}"
                with contextlib.suppress(OSError):  # a full disk: the first failed write is the one to report
                    self._write_summary(state, error)
                raise
            summary = self._write_summary(state, error)
        self._emit(
            phase=state,
            draw=None,
            draw_index=len(self.draw_names),
            draws=len(self.draw_names),
            done=0,
            total=0,
            message=error or "finished",
        )
        return summary

    async def _run_draw(
        self, client: httpx.AsyncClient, draw: str, k: int, model: str, attempt: int
    ) -> tuple[ReplayState, str | None]:
        planned = self.planned(draw)
        path = self.draw_file(draw)
        tally = self.tally(draw)
        done_ok = {rid for rid, rec in tally.latest.items() if rec.ok}
        salt = f"frank-{self.run_id}-{draw}-a{attempt}-{secrets.token_hex(8)}"
        ids = [r.id for r in planned]
        done = sum(1 for rid in ids if rid in done_ok)
        common = dict(draw=draw, draw_index=k, draws=len(self.draw_names), total=len(planned))
        for index, req in enumerate(planned):
            if req.id in done_ok:
                continue
            if self._stop.is_set():
                return "stopped", "stopped on request"
            self._emit(phase="request", done=done, current=req.id, task=req.task, turn=req.turn, **common)
            typed, alive = await self._replay_one(client, req, index, model, salt, attempt)
            _append(path, typed.to_json())
            tally.add(typed)
            done += 1
            self._write_summary("running")
            totals = tally.totals() if self.progress else None
            self._emit(
                phase="result",
                done=done,
                current=None,
                task=req.task,
                turn=req.turn,
                last=typed,
                totals=totals,
                **common,
            )
            if not alive:
                msg = (
                    f"the engine stopped answering at request {req.id} ({index + 1} of {len(planned)} in "
                    f"{draw}); {done} recorded. Resume with: frank replay --resume {self.run_id}"
                )
                self._emit(phase="interrupted", done=done, message=msg, **common)
                return "interrupted", msg
        self._emit(phase="draw_done", done=done, totals=tally.totals(), **common)
        return "finished", None

    def run_sync(self) -> ReplaySummary:
        return asyncio.run(self.run())


def start_replay(
    workload: Workload | Path | str,
    base_url: str,
    options: ReplayOptions | None = None,
    out: Path | None = None,
    progress: ProgressFn | None = None,
) -> ReplayRunner:
    """Prepare a new run. A path is checked and loaded first (all of it must be valid: nothing is sent
    from a workload with errors)."""
    options = options or ReplayOptions()
    if not isinstance(workload, Workload) or not workload.requests:
        workload = load_workload(workload if not isinstance(workload, Workload) else workload.path, options.draws)
    if out is not None:
        out = Path(out).expanduser()
        if (out / RUN_FILE).exists():
            raise FrankError(f"{out} already holds a replay run: resume it with --resume {out}, or pick another --out")
    return ReplayRunner(workload, base_url, options, out, progress)


@dataclass(frozen=True)
class EngineAt:
    """This user's engine, as run.json's `engine` records it."""

    profile: str | None
    knobs: dict[str, Any]
    pid: int | None
    started_at: float | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class LiveKnobs:
    """The live knobs' values (a profile's `apply = "live"` knobs: the region cache, say) of this user's engine,
    read from the controller's record around each request: `frank engine knob` and the console's `c` write a
    new value there once the engine took it. Nothing for an engine not this user's, or once the record
    names another start (the engine was restarted under the run)."""

    def __init__(self, engine: EngineAt | None) -> None:
        self.defaults: dict[str, Any] = {}
        self._engine = engine
        self._files: StateFiles | None = None
        if engine is None or not engine.profile:
            return
        from frank.engine.profiles import load_profile

        try:
            profile = load_profile(engine.profile)
        except FrankError:
            return
        self.defaults = {name: k.default for name, k in profile.knobs.items() if k.apply == "live"}
        if self.defaults:
            from frank.engine.controller import EngineController

            self._files = EngineController().files

    def read(self) -> dict[str, Any] | None:
        """The live knob values now, or None (no live knobs, or not this user's engine)."""
        if self._files is None or self._engine is None:
            return None
        record = self._files.read_record()  # None when missing or torn (mid-write: never trusted)
        if record is None or record.started_at != self._engine.started_at:
            return None
        return {name: record.knobs.get(name, default) for name, default in self.defaults.items()}

    def changed(self, start: dict[str, Any] | None) -> dict[str, Any] | None:
        """The values now when they differ from `start` (a knob flipped while the request ran), else None."""
        if start is None:
            return None
        now = self.read()
        return now if now is not None and now != start else None


def engine_at(base_url: str) -> EngineAt | None:
    """The profile and knob values of this user's engine when it is the one at `base_url` (the campaign's
    revert watch reads them from run.json); None for any other server."""
    from frank.engine.controller import EngineController

    st = EngineController().status(check_health=False)
    if st.state != "ready" or not st.url or st.url.rstrip("/") != base_url.rstrip("/"):
        return None
    return EngineAt(profile=st.profile, knobs=st.knobs, pid=st.pid, started_at=st.started_at)


def resume_replay(
    run: str | Path,
    base_url: str | None = None,
    progress: ProgressFn | None = None,
    api_key: str | None = None,
    restart: bool = False,
) -> ReplayRunner:
    """Continue a run from its folder: the same workload (unchanged), options and draws. With `restart`,
    unfinished draws are replayed from their first request (earlier records are kept)."""
    run_dir = resolve_run_dir(run)
    meta = readfile.read_object(run_dir / RUN_FILE)
    opts = dict(meta.get("options") or {})
    if opts.get("draws") is not None:
        opts["draws"] = tuple(opts["draws"])
    options = replace(ReplayOptions(**opts), api_key=api_key)
    workload = load_workload(meta["workload"]["path"], meta.get("draws"))
    runner = ReplayRunner(workload, base_url or meta["base_url"], options, run_dir, progress)
    if restart:
        for draw in runner.draw_names:
            if not runner.tally(draw).totals().complete:
                _append(runner.draw_file(draw), {"id": RESTART, "draw": draw, "at": time.time()})
                runner.forget_tally(draw)  # the marker ends the draw's earlier pass: read the file again
    return runner
