"""A steady generation load on a llama.cpp server, so the GPU telemetry has the engine's own work to show,
and the engine's own timings for it (the `timings` object llama.cpp puts in every chat completion).

WORKERS clients each send one chat completion after another (non-streamed, MAX_TOKENS generated with
`ignore_eos`, a llama.cpp request field) until DURATION seconds have passed; with more workers than the
server has slots, the next request is already queued when one finishes. With no --url/--api-key it loads
frank's running engine (the state dir's URL and client key).

    python scripts/gpu_load.py --duration 40 [--workers 2 --max-tokens 512] [--url URL --api-key KEY]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPT = "Write a long, detailed walkthrough of how a sandboxed coding agent reads a repository, step by step."


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, required=True, help="seconds to keep sending")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--url", help="server base URL (default: frank's running engine)")
    p.add_argument("--api-key", help="bearer key (default: frank's running engine's client key)")
    p.add_argument("--model", help="model name (default: the server's first /v1/models entry)")
    p.add_argument("--start-file", type=Path, help="touch this file when the first request is sent")
    return p.parse_args(argv)


def engine_target() -> tuple[str, str | None]:
    from frank.engine.controller import EngineController

    controller = EngineController()
    status = controller.status()
    if status.state != "ready" or not status.url:
        raise SystemExit(f"no engine is ready (state: {status.state}); pass --url")
    return status.url, controller.client_api_key


async def worker(client: httpx.AsyncClient, url: str, body: dict[str, Any], until: float, out: list) -> None:
    while time.monotonic() < until:
        t0 = time.monotonic()
        try:
            resp = await client.post(url + "/v1/chat/completions", json=body)
            resp.raise_for_status()
            data = resp.json()
        except (httpx.HTTPError, ValueError) as exc:
            out.append({"error": f"{type(exc).__name__}: {exc}", "client_s": time.monotonic() - t0})
            await asyncio.sleep(0.5)
            continue
        out.append({"client_s": time.monotonic() - t0, "timings": data.get("timings") or {}})


def summarize(records: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    ok = [r for r in records if "error" not in r]
    tim = [r["timings"] for r in ok]
    predicted = sum(t.get("predicted_n", 0) for t in tim)
    predicted_ms = sum(t.get("predicted_ms", 0.0) for t in tim)
    prompt_n = sum(t.get("prompt_n", 0) for t in tim)
    prompt_ms = sum(t.get("prompt_ms", 0.0) for t in tim)
    per_token_ms = [t["predicted_ms"] / t["predicted_n"] for t in tim if t.get("predicted_n")]
    return {
        "requests": len(records),
        "failed": len(records) - len(ok),
        "errors": sorted({r["error"] for r in records if "error" in r})[:3],
        "wall_s": wall_s,
        "generated_tokens": predicted,
        "client_generated_tokens_per_s": predicted / wall_s if wall_s else None,
        "engine_generation_tokens_per_s": predicted / (predicted_ms / 1e3) if predicted_ms else None,
        "engine_ms_per_token_median": statistics.median(per_token_ms) if per_token_ms else None,
        "engine_prompt_tokens": prompt_n,
        "engine_prompt_tokens_per_s": prompt_n / (prompt_ms / 1e3) if prompt_ms else None,
        "client_s_per_request_median": statistics.median(r["client_s"] for r in ok) if ok else None,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    url, key = (args.url, args.api_key) if args.url else engine_target()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(120.0, connect=10.0)) as client:
        model = args.model or (await client.get(url + "/v1/models")).json()["data"][0]["id"]
        body = {
            "model": model,
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": args.max_tokens,
            "temperature": 1.0,
            "ignore_eos": True,
            "stream": False,
        }
        records: list[dict[str, Any]] = []
        if args.start_file:
            args.start_file.touch()
        t0 = time.monotonic()
        until = t0 + args.duration
        await asyncio.gather(*(worker(client, url, body, until, records) for _ in range(args.workers)))
        wall = time.monotonic() - t0
    return {"url": url, "model": model, "workers": args.workers, "max_tokens": args.max_tokens} | summarize(
        records, wall
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    summary = asyncio.run(run(args))
    print(json.dumps(summary, indent=2))
    return 0 if summary["requests"] and not summary["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
