"""The replay client's own overhead: client TTFT minus server TTFT at the median, for a ~30K-token prompt.

    .venv/bin/python benchmarks/bench_replay_client.py [--url URL] [--tokens 30000] [--n 20] [--json]

Without --url it uses the running engine (frank engine status) or starts the embedded one and stops it at
the end. Three clients send the same prompt (engine mode: one output token, streamed; the prefix cached
after a warm-up request, so each request is quick) and each request's server TTFT comes from /metrics
deltas around it:

  runner   the replay runner's own per-request path (async httpx), the figure the target is about (< 5 ms);
  runner_ids  the same with the prompt token IDs in the response (the default: the server serializes and
           sends ~30K IDs before the first token's chunk, which the client TTFT then includes);
  raw      a blocking raw-socket HTTP/1.1 client: the floor that any client pays, because vLLM starts its
           TTFT clock after it has received and validated the request body and stops it before the first
           chunk is written back;
  proxy    the runner through `frank record` (the recorder's added latency is proxy minus runner).

The runner's own overhead is (runner - raw): the runner's line is the gap the target is set on.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import secrets
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_engine import engine_url  # noqa: E402
from frank.engine.metrics import fetch_metrics, fetch_settled, request_delta  # noqa: E402
from frank.workloads.format import write_workload  # noqa: E402
from frank.workloads.replay import ReplayOptions, start_replay  # noqa: E402
from frank.workloads.w01 import _text  # noqa: E402

TOKEN = re.compile(rb'"content":"[^"]|"finish_reason":"')  # the runner's first-token rule, for raw bytes


def model_of(url: str) -> str:
    return httpx.get(url + "/v1/models", timeout=10).json()["data"][0]["id"]


def prompt_for(url: str, model: str, tokens: int) -> list[dict]:
    """A system + user prompt of about `tokens` tokens (measured with the engine's /tokenize)."""
    import random

    rng = random.Random(30_000)
    text = _text(rng, "py", tokens * 3)
    for _ in range(4):
        messages = [{"role": "system", "content": text}, {"role": "user", "content": "Summarize the code."}]
        n = httpx.post(url + "/tokenize", json={"model": model, "messages": messages}, timeout=60).json()["count"]
        if abs(n - tokens) < tokens * 0.02:
            break
        text = (text * 2)[: int(len(text) * tokens / n)]
    return messages


def raw_once(url: str, body: bytes, scraper: httpx.Client) -> float | None:
    """One request through a blocking raw socket; client TTFT minus server TTFT in ms (None: unattributed)."""
    u = urlparse(url)
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nContent-Type: application/json"
        f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    before = fetch_metrics(scraper, url)
    sock = socket.create_connection((u.hostname, u.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t0 = time.perf_counter()
    sock.sendall(head + body)
    buf, ttft = b"", None
    while ttft is None:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
        if TOKEN.search(buf):
            ttft = time.perf_counter() - t0
    while sock.recv(65536):
        pass
    sock.close()
    delta = request_delta(before, fetch_settled(scraper, url, before))
    return (ttft - delta.ttft_s) * 1000 if ttft is not None and delta.attributed else None


def start_recorder(url: str, out: Path):
    """`frank record` in its own process, as users run it. Returns (process, its URL)."""
    import os
    import subprocess

    repo = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "frank.console.cli",
            "record",
            "--upstream",
            url,
            "--listen",
            "127.0.0.1:0",
            "--out",
            str(out / "recording"),
        ],
        cwd=repo,
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    listen = re.search(r"(http://127\.0\.0\.1:\d+)", proc.stderr.readline())
    if not listen:
        proc.kill()
        raise RuntimeError("frank record did not start")
    return proc, listen.group(1)


async def interleaved(
    url: str, model: str, messages: list[dict], n: int, out: Path, proxy_url: str | None
) -> tuple[dict[str, list[float]], int]:
    """n rounds of (runner, raw socket[, runner via the recorder]) on the same cached prompt, so all three
    see the same machine load. The runner's path is its own per-request method."""
    records = [
        {
            "id": "r",
            "task": "bench",
            "episode": "bench",
            "turn": 1,
            "offset_s": 0.0,
            "body": {"messages": messages, "max_tokens": 1},
        }
    ]
    wl = write_workload(out / "wl", "bench", "", [("d", records)])
    bare = start_replay(wl, url, ReplayOptions(token_ids=False), out=out / "run")
    with_ids = start_replay(wl, url, ReplayOptions(), out=out / "run-ids")
    req = bare.workload.requests["d"][0]
    salt = f"bench-{secrets.token_hex(4)}"
    raw_body = json.dumps({**req.body, "model": model, "max_tokens": 1, "stream": True, "cache_salt": salt}).encode()
    gaps: dict[str, list[float]] = {"runner": [], "runner_ids": [], "raw_socket": [], "proxy": []}
    prompt_tokens = 0

    async def one(runner, base: str, key: str, keep: bool) -> None:
        nonlocal prompt_tokens
        runner.base_url = base
        rec, _alive = await runner._replay_one(client, req, 0, model, salt, 1)
        prompt_tokens = rec.get("prompt_tokens") or prompt_tokens
        if keep and rec["server"]["attributed"]:
            gaps[key].append((rec["client"]["ttft_s"] - rec["server"]["ttft_s"]) * 1000)

    async with httpx.AsyncClient() as client:
        with httpx.Client() as scraper:
            for i in range(n + 1):
                await one(bare, url, "runner", i > 0)
                await one(with_ids, url, "runner_ids", i > 0)
                raw = raw_once(url, raw_body, scraper)
                if i and raw is not None:
                    gaps["raw_socket"].append(raw)
                if proxy_url:
                    await one(bare, proxy_url, "proxy", i > 0)
    return gaps, prompt_tokens


def stats(gaps: list[float]) -> dict:
    q = statistics.quantiles(gaps, n=10) if len(gaps) >= 2 else [gaps[0]] * 9
    return {"n": len(gaps), "median_ms": statistics.median(gaps), "p10_ms": q[0], "p90_ms": q[-1]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url")
    ap.add_argument("--tokens", type=int, default=30_000)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--no-proxy", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    proc = None
    with engine_url(args.url) as url:
        try:
            model = model_of(url)
            messages = prompt_for(url, model, args.tokens)
            with tempfile.TemporaryDirectory() as tmp:
                proxy_url = None
                if not args.no_proxy:
                    proc, proxy_url = start_recorder(url, Path(tmp))
                gaps, prompt_tokens = asyncio.run(interleaved(url, model, messages, args.n, Path(tmp), proxy_url))
        finally:
            if proc is not None:
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=20)
    runner, raw, proxy = gaps["runner"], gaps["raw_socket"], gaps["proxy"]
    result = {
        "prompt_tokens": prompt_tokens,
        "runner": stats(runner),
        "runner_ids": stats(gaps["runner_ids"]),
        "raw_socket": stats(raw),
        "prompt_ids_cost_ms": statistics.median(a - b for a, b in zip(gaps["runner_ids"], runner)),
        "runner_minus_raw_ms": statistics.median(runner) - statistics.median(raw),
        "runner_minus_raw_paired_ms": statistics.median(a - b for a, b in zip(runner, raw)),
        "target_ms": 5.0,
        "runner_within_target": statistics.median(runner) < 5.0,
    }
    if proxy:
        result["proxy"] = stats(proxy)
        result["recorder_added_ms"] = statistics.median(a - b for a, b in zip(proxy, runner))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"prompt: {prompt_tokens} tokens; client TTFT - server TTFT (ms), {args.n} requests each")
    for name in ("runner", "runner_ids", "raw_socket", "proxy"):
        if name in result:
            s = result[name]
            print(f"  {name:<11} median {s['median_ms']:7.2f}   p10 {s['p10_ms']:7.2f}   p90 {s['p90_ms']:7.2f}")
    print(
        f"  runner's own overhead (runner - raw socket, median of paired differences): "
        f"{result['runner_minus_raw_paired_ms']:.2f} ms"
    )
    if "recorder_added_ms" in result:
        print(
            f"  recorder's added latency (proxy - runner, median of paired differences): "
            f"{result['recorder_added_ms']:.2f} ms"
        )
    print(f"  asking for the prompt token IDs in the same response adds: {result['prompt_ids_cost_ms']:.2f} ms")
    print(f"  target: runner median < 5 ms: {'met' if result['runner_within_target'] else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
