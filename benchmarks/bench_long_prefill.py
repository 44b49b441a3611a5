"""Prefill of full-scale W01 prompts on an embedded engine: cold, then cached, and linear in length or not.

Starts its own engine of `--profile` (default embedded-cpu-swa, the sliding-window model) in a private state
dir, then:
- the longest request of the chosen W01 draw (about 170K tiny-tokenizer tokens at full scale), twice with one
  cache_salt: first cold (nothing in vLLM's prefix cache), then cached (every full block reused);
- a length ladder: plain /v1/completions prompts of token IDs (fresh salt each), to show how prefill time
  grows with prompt length (linear for sliding-window attention, quadratic for full attention).
Each request asks for one output token; its TTFT, queue, prefill and front end (TTFT - queue - prefill) come
from /metrics deltas (frank.engine.metrics.request_delta), as in the replay runner.

    .venv/bin/python benchmarks/bench_long_prefill.py [--profile embedded-cpu-swa] [--ladder 20000,40000,...]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from frank.engine.controller import EngineController  # noqa: E402
from frank.engine.metrics import fetch_metrics, fetch_settled, request_delta  # noqa: E402
from frank.workloads.catalog import resolve_workload  # noqa: E402
from frank.workloads.format import load_workload  # noqa: E402


def _timed(client: httpx.Client, url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    before = fetch_metrics(client, url)
    t0 = time.perf_counter()
    resp = client.post(url + path, json=body, timeout=1800)
    wall = time.perf_counter() - t0
    resp.raise_for_status()
    delta = request_delta(before, fetch_settled(client, url, before))
    return {
        "wall_s": round(wall, 3),
        "ttft_s": delta.ttft_s,
        "queue_s": delta.queue_s,
        "prefill_s": delta.prefill_s,
        "front_end_s": delta.front_end_s,
        "prompt_tokens": delta.prompt_tokens,
        "cached_tokens": delta.cached_tokens,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="embedded-cpu-swa")
    parser.add_argument("--workload", default="w01-full")
    parser.add_argument("--draw", default="draw-1")
    parser.add_argument(
        "--ladder",
        default="20000,40000,80000,160000",
        help="token-ID prompt lengths for the linearity check ('' to skip)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    workload = load_workload(resolve_workload(args.workload), draws=[args.draw])
    longest = max(workload.requests[args.draw], key=lambda r: len(json.dumps(r.body)))
    state = Path(tempfile.mkdtemp(prefix="bench-long-prefill-"))
    controller = EngineController(state_dir=state)
    t0 = time.monotonic()
    status = controller.start(args.profile, {"region_cache": "off"})
    result: dict[str, Any] = {
        "profile": args.profile,
        "ready_s": round(time.monotonic() - t0, 1),
        "load_avg": os.getloadavg(),
    }
    try:
        url = status.url
        with httpx.Client() as client:
            model = client.get(url + "/v1/models").json()["data"][0]["id"]
            body = dict(longest.body, model=model, max_tokens=1, stream=False, cache_salt=secrets.token_hex(8))
            result["w01_request"] = longest.id
            result["w01_cold"] = _timed(client, url, "/v1/chat/completions", body)
            result["w01_cached"] = _timed(client, url, "/v1/chat/completions", body)
            ladder = []
            rng = random.Random(7)
            for n in [int(x) for x in args.ladder.split(",") if x]:
                ids = [rng.randrange(100, 8000) for _ in range(n)]
                r = _timed(
                    client,
                    url,
                    "/v1/completions",
                    {"model": model, "prompt": ids, "max_tokens": 1, "cache_salt": secrets.token_hex(8)},
                )
                r["prefill_tokens_per_s"] = round(n / r["prefill_s"]) if r["prefill_s"] else None
                ladder.append({"tokens": n, **r})
            result["ladder"] = ladder
    finally:
        controller.stop()
        shutil.rmtree(state, ignore_errors=True)
    result["load_avg_after"] = os.getloadavg()
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{args.profile}: ready in {result['ready_s']} s; load average {result['load_avg']}")
        for name in ("w01_cold", "w01_cached"):
            r = result[name]
            print(
                f"  {result['w01_request']} {name[4:]:6}: {r['prompt_tokens']:.0f} tokens "
                f"({r['cached_tokens']:.0f} cached), prefill {r['prefill_s']:.2f} s, TTFT {r['ttft_s']:.2f} s, "
                f"front end {r['front_end_s']:.3f} s"
            )
        for r in result["ladder"]:
            print(
                f"  ladder {r['tokens']:>7} tokens: prefill {r['prefill_s']:.2f} s "
                f"({r['prefill_tokens_per_s']} tokens/s), front end {r['front_end_s']:.3f} s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
