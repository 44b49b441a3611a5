"""Per-request attribution cross-check: /metrics deltas against the response's own timings.

    .venv/bin/python benchmarks/bench_attribution.py [--url URL] [--n 30] [--concurrent 4] [--json]

Without --url it uses the running engine (frank engine status) or starts the embedded one (whose profile
has --enable-per-request-metrics and --per-request-spec-decode-metrics summary) and stops it at the end.

1. Sequential: the replay runner (full mode, streamed, temperature 0, prompts that repeat themselves so
   ngram drafts find matches) replays `--n` requests one at a time. Each record holds the /metrics-delta
   values (`server`, attributed) and the response's raw `metrics`; frank.engine.metrics.response_values turns
   the latter into the same fields. Printed per field: how many requests had both, how many agree exactly
   (to 1 us / one token), the median and the worst absolute difference.
2. Concurrent: `--concurrent` requests at once, scraped around the whole batch: the deltas cannot
   attribute any of them (more than one finished between the scrapes), the responses still carry theirs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_engine import engine_url  # noqa: E402
from frank.engine.metrics import fetch_metrics, fetch_settled, request_delta, response_values  # noqa: E402
from frank.workloads.format import write_workload  # noqa: E402
from frank.workloads.replay import ReplayOptions, read_records, start_replay  # noqa: E402
from frank.workloads.w01 import _text  # noqa: E402

# field -> unit of its difference; seconds are printed in ms
FIELDS = {
    "queue_s": "s",
    "prefill_s": "s",
    "decode_s": "s",
    "inference_s": "s",
    "ttft_s": "s",
    "front_end_s": "s",
    "drafted_steps": "n",
    "draft_tokens": "n",
    "accepted_tokens": "n",
    "decode_steps": "n",
    "verify_step_s": "s",
    "acceptance_length": "x",
    "generation_tokens": "n",
    "prompt_tokens": "n",
}


def _body(rng: random.Random, i: int) -> dict[str, Any]:
    text = _text(rng, "py", 600 + 40 * i)
    return {
        "messages": [
            {"role": "system", "content": text},
            {"role": "user", "content": "Repeat the code above exactly."},
        ],
        "max_tokens": 48 + (i % 3) * 16,
        "temperature": 0,
    }


def sequential(url: str, n: int, out: Path) -> list[dict[str, Any]]:
    rng = random.Random(13)
    records = [
        {"id": f"r{i}", "task": "bench", "episode": "bench", "turn": 1, "offset_s": 0.0, "body": _body(rng, i)}
        for i in range(n)
    ]
    wl = write_workload(out / "wl", "attribution", "", [("d", records)])
    runner = start_replay(wl, url, ReplayOptions(mode="full"), out=out / "run")
    runner.run_sync()
    return read_records(runner.draw_file("d"))


def compare(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    diffs: dict[str, list[float]] = {f: [] for f in FIELDS}
    for rec in records:
        server = rec.get("server") or {}
        if rec.get("status") != "ok" or not server.get("attributed") or not rec.get("response_metrics"):
            continue
        got = response_values(
            rec["response_metrics"],
            rec.get("completion_tokens"),
            rec.get("prompt_tokens"),
            (rec.get("client") or {}).get("ttft_s"),
        )
        if got is None:
            continue
        values = got[0].__dict__
        for field in FIELDS:
            a, b = server.get(field), values.get(field)
            if a is not None and b is not None:
                diffs[field].append(b - a)
    out = {}
    for field, d in diffs.items():
        if not d:
            continue
        tol = 1e-6 if FIELDS[field] == "s" else 1e-9
        worst = max(d, key=abs)
        out[field] = {
            "n": len(d),
            "exact": sum(abs(x) <= tol for x in d),
            "median_abs": statistics.median(abs(x) for x in d),
            "worst": worst,
            "unit": FIELDS[field],
        }
    return out


async def concurrent(url: str, model: str, k: int) -> dict[str, Any]:
    rng = random.Random(99)
    async with httpx.AsyncClient(timeout=600) as client:

        async def one(i: int) -> dict[str, Any]:
            body = {**_body(rng, i), "model": model, "cache_salt": f"conc-{i}-{rng.random()}"}
            return (await client.post(url + "/v1/chat/completions", json=body)).json()

        with httpx.Client(timeout=30) as scraper:
            before = fetch_metrics(scraper, url)
            answers = await asyncio.gather(*(one(i) for i in range(k)))
            after = fetch_settled(scraper, url, before, expected=k)
    delta = request_delta(before, after)
    with_own = [a for a in answers if (a.get("metrics") or {}).get("generation_time_ms") is not None]
    return {
        "requests": k,
        "delta_attributed": delta.attributed,
        "delta_reason": delta.reason,
        "responses_with_own_metrics": len(with_own),
    }


def _fmt(field: str, v: float, unit: str) -> str:
    return f"{v * 1000:+.4f} ms" if unit == "s" else f"{v:+.4g}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url")
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--concurrent", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with engine_url(args.url) as url:
        model = httpx.get(url + "/v1/models", timeout=10).json()["data"][0]["id"]
        with tempfile.TemporaryDirectory() as tmp:
            records = sequential(url, args.n, Path(tmp))
        result: dict[str, Any] = {
            "requests": len(records),
            "fields": compare(records),
            "sources": sorted({s for r in records for s in ((r.get("server") or {}).get("sources") or {}).values()}),
        }
        result["concurrent"] = asyncio.run(concurrent(url, model, args.concurrent))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['requests']} sequential requests (full mode, streamed): response's own values - /metrics deltas")
    print(f"  {'field':<18} {'n':>4} {'exact':>6} {'median |diff|':>16} {'worst diff':>16}")
    for field, r in result["fields"].items():
        print(
            f"  {field:<18} {r['n']:>4} {r['exact']:>6} {_fmt(field, r['median_abs'], r['unit']).lstrip('+'):>16} "
            f"{_fmt(field, r['worst'], r['unit']):>16}"
        )
    print(
        "  (ttft_s and front_end_s: the response has no TTFT from arrival; the client's TTFT stands in, so their"
        " difference is the client path)"
    )
    print(
        "  (decode_steps from a response is output tokens - 1 - accepted: too low when the last step's accepted"
        " tokens were cut at max_tokens or a stop; verify_step_s follows it)"
    )
    c = result["concurrent"]
    print(
        f"{c['requests']} concurrent requests: deltas attributed: {c['delta_attributed']} ({c['delta_reason']}); "
        f"responses with their own metrics: {c['responses_with_own_metrics']} of {c['requests']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
