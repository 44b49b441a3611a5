"""The adapter's HTTP server: the OpenAI API over exllamav3's generator, on the standard library's threading
HTTP server (one thread per connection; one generation at a time behind a lock).

    POST /v1/chat/completions   messages, tools (parsed out of the answer by --tool-call-parser), stream
    POST /v1/completions        a prompt as text or token IDs; `prompt_logprobs` k answers as vLLM does (the
                                top k and the actual token at every position after the first)
    POST /tokenize              {"prompt": text} -> {"tokens": [...]}, as vLLM's
    GET  /v1/models, /metrics   (Prometheus text, vLLM's names: frank.engine.exl3.metrics)
    GET  /health                200 once the model is loaded (the port opens only then); no key needed

Every route but /health needs `Authorization: Bearer TOKEN`, TOKEN from FRANK_CONTROL_TOKEN (frank's engine
token; the server refuses to start without one). `python -m frank.engine.exl3.server --help` lists the flags;
flags it does not know go to exllamav3's own loader (its model_init flags, e.g. --moe_cpu_pinned_arena).
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypedDict

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from frank.engine.exl3.ext_check import ExtensionCheckError
from frank.engine.exl3.generator import Event, Finished, Generator, Piece, Sampling
from frank.engine.exl3.metrics import AdapterMetrics
from frank.engine.exl3.tools import FORMATS, call_start, split_tool_calls

TOKEN_ENV = "FRANK_CONTROL_TOKEN"
MAX_BODY = 64 << 20


class RequestError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """(the adapter's flags, the rest for exllamav3's loader)."""
    p = argparse.ArgumentParser(prog="python -m frank.engine.exl3.server", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a folder of EXL3 weights (exllamav3's converter's output)")
    p.add_argument("--served-model-name", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--max-model-len", type=int, default=8192, help="the context served (the cache's tokens)")
    p.add_argument("--spec-type", choices=("none", "draft-dspark"), default="none")
    p.add_argument("--draft-tokens", type=int, default=0, help="draft tokens per verify step (0: the draft's own)")
    p.add_argument("--tool-call-parser", choices=sorted(FORMATS), default="deepseek_v3")
    p.add_argument(
        "--expert-stats-dir",
        default="",
        help="where exllamav3 keeps its routing profile (default: a fresh folder per start)",
    )
    return p.parse_known_args(argv)


class Adapter:
    """The routes' logic over one generator; the HTTP handler only moves bytes."""

    def __init__(self, generator: Generator, served_model: str, tool_parser: str, token: str) -> None:
        self.generator = generator
        self.served_model = served_model
        self.tool_parser = tool_parser
        self.token = token
        self.metrics = AdapterMetrics(served_model)
        self.lock = threading.Lock()

    def authorized(self, header: str | None) -> bool:
        given = (header or "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), self.token.encode())

    # -- requests -----------------------------------------------------------------------------
    def _check_model(self, body: dict[str, Any]) -> None:
        model = body.get("model")
        if model not in (None, self.served_model):
            raise RequestError(404, f"The model `{model}` does not exist (this server serves {self.served_model})")

    def _sampling(self, body: dict[str, Any], default_max: int, prompt_len: int) -> Sampling:
        max_tokens = next(
            (body[k] for k in ("max_completion_tokens", "max_tokens") if body.get(k) is not None), default_max
        )
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise RequestError(400, f"max_tokens must be a positive integer, got {max_tokens!r}")
        room = self.generator.max_model_len - prompt_len
        if room < 1:
            raise RequestError(
                400, f"the prompt's {prompt_len} tokens fill the context of {self.generator.max_model_len}"
            )
        stop = body.get("stop") or ()
        stop = (stop,) if isinstance(stop, str) else tuple(str(s) for s in stop)
        temperature = body.get("temperature")
        return Sampling(
            max_tokens=min(max_tokens, room),
            temperature=1.0 if temperature is None else float(temperature),
            top_p=float(body.get("top_p") or 1.0),
            stop=stop,
            seed=body.get("seed"),
            ignore_eos=body.get("ignore_eos") is True,
        )

    def run(self, prompt: list[int], sampling: Sampling, on_piece: Callable[[Piece], None]) -> Finished:
        """One generation behind the lock, its steps and totals into the metrics."""
        arrived = time.perf_counter()
        self.metrics.waiting.labels(self.served_model).inc()
        with self.lock:
            self.metrics.waiting.labels(self.served_model).dec()
            self.metrics.running.labels(self.served_model).inc()
            started = time.perf_counter()
            first_at: float | None = None
            done: Finished | None = None
            try:
                events: Iterator[Event] = self.generator.generate(prompt, sampling)
                try:
                    for event in events:
                        if isinstance(event, Finished):
                            done = event
                            break
                        self.metrics.step(first_at is None, event.step_s, event.drafted)
                        first_at = first_at or time.perf_counter()
                        on_piece(event)
                finally:
                    close = getattr(events, "close", None)
                    if close:
                        close()  # a client gone mid-stream: the generator cancels its job
            finally:
                self.metrics.running.labels(self.served_model).dec()
        if done is None:
            raise RuntimeError("the generator ended without a Finished event")
        ended = time.perf_counter()
        self.metrics.finished(done, started - arrived, (first_at or ended) - arrived, ended - arrived)
        return done

    def chat_prompt(self, body: dict[str, Any]) -> tuple[list[int], bool]:
        self._check_model(body)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError(400, "messages must be a non-empty list")
        tools = body.get("tools") if body.get("tool_choice") != "none" else None
        return self.generator.chat_prompt(messages, tools or None), bool(tools)

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt, tools = self.chat_prompt(body)
        sampling = self._sampling(body, self.generator.max_model_len, len(prompt))
        text: list[str] = []
        done = self.run(prompt, sampling, lambda piece: text.append(piece.text))
        content, calls = split_tool_calls(self.tool_parser, "".join(text)) if tools else ("".join(text), [])
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.served_model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else done.finish_reason}
            ],
            "usage": usage(done),
        }

    def chat_stream(self, body: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> None:
        """SSE chunks as OpenAI's API sends them. With tools, text from the call block's start marker on is
        held back and sent as tool_calls at the end (or as text, when it held no well-formed call)."""
        prompt, tools = self.chat_prompt(body)
        sampling = self._sampling(body, self.generator.max_model_len, len(prompt))
        head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk", "created": int(time.time())}
        head["model"] = self.served_model

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        marker = call_start(self.tool_parser)
        held: list[str] = []  # all text so far; `sent` of it is out
        sent = 0
        send(chunk({"role": "assistant", "content": ""}))

        def on_piece(piece: Piece) -> None:
            nonlocal sent
            held.append(piece.text)
            text = "".join(held)
            upto = safe_prefix(text, marker) if tools else len(text)
            if upto > sent:
                send(chunk({"content": text[sent:upto]}))
                sent = upto

        done = self.run(prompt, sampling, on_piece)
        text = "".join(held)
        content, calls = split_tool_calls(self.tool_parser, text) if tools else (text, [])
        if len(content) > sent:
            send(chunk({"content": content[sent:]}))
        for i, call in enumerate(calls):
            send(chunk({"tool_calls": [{"index": i, **call}]}))
        send(chunk({}, "tool_calls" if calls else done.finish_reason))
        if (body.get("stream_options") or {}).get("include_usage"):
            send({**head, "choices": [], "usage": usage(done)})

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check_model(body)
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            ids = self.generator.encode(prompt)
        elif (
            isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
        ):
            ids = list(prompt)
        else:
            raise RequestError(400, "prompt must be a string or a non-empty list of token IDs")
        if body.get("echo"):
            raise RequestError(400, "echo is not supported: ask for prompt_logprobs")
        k = body.get("prompt_logprobs")
        if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
            raise RequestError(400, f"prompt_logprobs must be a positive integer, got {k!r}")
        sampling = self._sampling(body, 16, len(ids))
        rows = None
        if k:
            with self.lock:
                rows = self.generator.prompt_logprobs(ids, k)
        text: list[str] = []
        done = self.run(ids, sampling, lambda piece: text.append(piece.text))
        choice: dict[str, Any] = {
            "index": 0,
            "text": "".join(text),
            "logprobs": None,
            "finish_reason": done.finish_reason,
        }
        if rows is not None:
            choice["prompt_logprobs"] = [None] + [
                {str(tok): {"logprob": lp, "rank": rank} for rank, (tok, lp) in enumerate(ranked(row), 1)}
                for row in rows
            ]
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.served_model,
            "choices": [choice],
            "usage": usage(done),
        }

    def tokenize(self, body: dict[str, Any]) -> Tokenized:
        self._check_model(body)
        if not isinstance(body.get("prompt"), str):
            raise RequestError(400, "prompt must be a string")
        tokens = self.generator.encode(body["prompt"])
        return {"tokens": tokens, "count": len(tokens), "max_model_len": self.generator.max_model_len}

    def models(self) -> ModelList:
        card: ModelCard = {
            "id": self.served_model,
            "object": "model",
            "owned_by": "frank",
            "max_model_len": self.generator.max_model_len,
        }
        return {"object": "list", "data": [card]}


def ranked(row: dict[int, float]) -> list[tuple[int, float]]:
    return sorted(row.items(), key=lambda item: -item[1])


class CachedDetails(TypedDict):
    cached_tokens: int


class Usage(TypedDict):
    """OpenAI's usage object, with vLLM's cached-token detail."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: CachedDetails


class Tokenized(TypedDict):
    """vLLM's /tokenize answer (what frank's fidelity reads)."""

    tokens: list[int]
    count: int
    max_model_len: int


class ModelCard(TypedDict):
    id: str
    object: str
    owned_by: str
    max_model_len: int


class ModelList(TypedDict):
    object: str
    data: list[ModelCard]


def usage(done: Finished) -> Usage:
    return {
        "prompt_tokens": done.prompt_tokens,
        "completion_tokens": done.completion_tokens,
        "total_tokens": done.prompt_tokens + done.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": done.cached_tokens},
    }


def safe_prefix(text: str, marker: str) -> int:
    """How much of `text` can be sent while a tool-call block may still begin: up to the marker, and never
    a tail that could be the marker's start."""
    at = text.find(marker)
    if at >= 0:
        return at
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-n:]):
            return len(text) - n
    return len(text)


def make_handler(adapter: Adapter) -> type[BaseHTTPRequestHandler]:
    posts: dict[str, Callable[[dict[str, Any]], Mapping[str, object]]] = {  # answers: JSON objects
        "/v1/chat/completions": adapter.chat,
        "/v1/completions": adapter.completion,
        "/tokenize": adapter.tokenize,
    }

    class Handler(BaseHTTPRequestHandler):
        server_version = "frank-exl3"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
            if not self.path.startswith(("/health", "/metrics")):
                sys.stderr.write(f"[exl3_server] {self.command} {self.path} {args[1] if len(args) > 1 else ''}\n")

        def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, value: Mapping[str, object]) -> None:
            self._send(status, json.dumps(value).encode())

        def _error(self, status: int, message: str) -> None:
            kind = "invalid_request_error" if status < 500 else "server_error"
            self._json(status, {"error": {"message": message, "type": kind, "code": status}})

        def _authorized(self) -> bool:
            if adapter.authorized(self.headers.get("Authorization")):
                return True
            self._error(401, "a valid Authorization: Bearer key is required")
            return False

        def do_GET(self) -> None:  # noqa: N802 (the base class's name)
            if self.path == "/health":
                self._send(200, b"", "text/plain")
            elif not self._authorized():
                return
            elif self.path == "/metrics":
                self._send(200, generate_latest(adapter.metrics.registry), CONTENT_TYPE_LATEST)
            elif self.path == "/v1/models":
                self._json(200, adapter.models())
            else:
                self._error(404, f"no route GET {self.path}")

        def do_POST(self) -> None:  # noqa: N802
            if not self._authorized():
                return
            try:
                body = self._body()
                if self.path == "/v1/chat/completions" and body.get("stream"):
                    self._stream(body)
                elif self.path in posts:
                    self._json(200, posts[self.path](body))
                else:
                    self._error(404, f"no route POST {self.path}")
            except RequestError as exc:
                self._error(exc.status, str(exc))

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                raise RequestError(413, f"a body of {length} bytes is over the {MAX_BODY} this server reads")
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError as exc:
                raise RequestError(400, f"the body is not JSON: {exc}") from None
            if not isinstance(body, dict):
                raise RequestError(400, "the body must be a JSON object")
            return body

        def _stream(self, body: dict[str, Any]) -> None:
            adapter.chat_prompt(body)  # a bad request gets its status before the stream starts
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()

            def send(event: dict[str, Any]) -> None:
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()

            try:
                adapter.chat_stream(body, send)
                self.wfile.write(b"data: [DONE]\n\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client left; run() closed the generation
            except RequestError as exc:
                send({"error": {"message": str(exc), "code": exc.status}})

    return Handler


def serve(generator: Generator, args: argparse.Namespace, token: str) -> ThreadingHTTPServer:
    """A server for `generator` listening on args.host:args.port (serve_forever() runs it)."""
    adapter = Adapter(generator, args.served_model_name, args.tool_call_parser, token)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(adapter))
    server.daemon_threads = True
    return server


def control_token() -> str:
    token = os.environ.get(TOKEN_ENV, "")
    if not token:
        raise SystemExit(f"[exl3_server] {TOKEN_ENV} is not set: every route but /health needs the engine's token")
    return token


def main(argv: list[str]) -> int:
    args, extra = parse_args(argv)
    token = control_token()
    if not args.expert_stats_dir:
        args.expert_stats_dir = tempfile.mkdtemp(prefix="exl3-expert-stats-")
    from frank.engine.exl3.exl3_generator import Exl3Generator

    t0 = time.monotonic()
    try:
        generator = Exl3Generator(args, extra)
    except ImportError as exc:
        raise SystemExit(f"[exl3_server] exllamav3 cannot be imported by {sys.executable}: {exc}") from None
    except ExtensionCheckError as exc:
        raise SystemExit(f"[exl3_server] refused: {exc}") from None
    server = serve(generator, args, token)
    drafts = f"{generator.num_draft_tokens} draft tokens a step" if generator.num_draft_tokens else "no draft model"
    print(
        f"[exl3_server] listening on {args.host}:{args.port} after {time.monotonic() - t0:.1f} s ({drafts})", flush=True
    )
    server.serve_forever()
    return 0


if __name__ == "__main__":  # exllamav3's CPU MoE worker is a spawn child: it re-imports this as __mp_main__
    sys.exit(main(sys.argv[1:]))
