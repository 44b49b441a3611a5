"""Harness overhead per turn and the wall time of a w01-mini draw, on the running engine (with the tool
calls the model made, in the mode its profile declares: on `embedded-cpu-smollm2`, SmolLM2's constrained
calls on vLLM).

    .venv/bin/python benchmarks/bench_episodes.py [--url URL] [--draws 1] [--json]

Without --url it uses the running engine (frank engine status); nothing else may send requests to it
while this runs, because the engine's own time comes from /metrics deltas around each episode
(vllm:e2e_request_latency_seconds: from the request's arrival in the engine to its end).

Per episode, from inspect's eval log, the recording and /metrics:
  client   sum of inspect's model-call times (each call as the agent saw it: openai client, recorder hop,
           HTTP, the API server, the engine);
  recorder sum of the recorder's per-request durations (request received -> response relayed);
  engine   the engine's e2e latency summed over the episode's requests (the histogram's count must rise by
           exactly the episode's requests, else the episode is not attributed);
  overhead per turn = client - engine per request (target < 5 ms), as the sum of two parts: the client
           side (client - recorder, per call inspect timed: the agent's openai client and the recorder's hop)
           and the server outside e2e (recorder - engine, per request: HTTP, chat template, tokenization in
           the API server, which is the engine's front end rather than the harness);
  loop per turn = (client_s - model_s - tool_s) / turns: inspect's own agent loop between calls.
The wall time of a draw (what `frank episodes run` takes, inspect start-up and grading included) is printed
beside the draw's client total.

Peer, in the same run: the same chat request (about 1.5K tokens, one output token) sent alternately by
inspect's model API (`get_model(...).generate`, what the agent calls each turn) and by a bare httpx client,
straight to the engine: the difference of the medians is inspect's own client cost per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from frank.engine.metrics import fetch_metrics  # noqa: E402
from frank.episodes.runner import create_run, engine_endpoint, read_jsonl, run_episodes  # noqa: E402
from frank.episodes.target import served_model  # noqa: E402

E2E = "vllm:e2e_request_latency_seconds"

PEER = r"""
import asyncio, json, statistics, sys, time
import httpx
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig, get_model
url, model, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = " ".join(f"row {i}: order A{i:07d} region north quantity {i % 17} price {i % 991}.{i % 100:02d}" for i in range(120))
async def main():
    m = get_model(f"openai-api/frank/{model}", base_url=url + "/v1", api_key="frank")
    cfg = GenerateConfig(max_tokens=1, temperature=1.0, max_retries=0)
    msgs = [ChatMessageSystem(content="You are an engineer."), ChatMessageUser(content=text)]
    body = {"model": model, "max_tokens": 1, "temperature": 1.0,
            "messages": [{"role": "system", "content": "You are an engineer."}, {"role": "user", "content": text}]}
    a, b = [], []
    async with httpx.AsyncClient(timeout=60) as c:
        for i in range(n + 2):
            t = time.perf_counter(); await m.generate(msgs, config=cfg); x = time.perf_counter() - t
            t = time.perf_counter(); r = await c.post(url + "/v1/chat/completions", json=body); r.json(); y = time.perf_counter() - t
            if i >= 2:   # the first two warm the prefix cache and the clients
                a.append(x); b.append(y)
    print(json.dumps({"inspect_ms": round(statistics.median(a) * 1000, 2), "httpx_ms": round(statistics.median(b) * 1000, 2)}))
asyncio.run(main())
"""  # noqa: E501


def peer(url: str, model: str, n: int = 20) -> dict:
    import subprocess

    from frank.episodes.harness import agent_python, offline_env

    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [str(agent_python()), "-c", PEER, url, model, str(n)],
            capture_output=True,
            text=True,
            timeout=300,
            env=offline_env(Path(tmp)),
        )
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    figures["inspect_minus_httpx_ms"] = round(figures["inspect_ms"] - figures["httpx_ms"], 2)
    return figures


def _e2e(sample) -> tuple[float, float]:
    return sample.hist(E2E)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default=None)
    ap.add_argument("--suite", default="w01-mini")
    ap.add_argument("--draws", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    url = engine_endpoint(args.url)
    client = httpx.Client(timeout=30.0)
    scrapes: dict[tuple[int, str], dict[str, tuple[float, float]]] = {}

    def on_event(ev: dict) -> None:
        if ev["event"] in ("episode_started", "episode_done"):
            key = (ev["draw"], ev["task"])
            scrapes.setdefault(key, {})[ev["event"]] = _e2e(fetch_metrics(client, url))

    with tempfile.TemporaryDirectory(prefix="frank-bench-episodes-") as tmp:
        folder = create_run(args.suite, args.draws, out=Path(tmp) / "run")
        t0 = time.perf_counter()
        outcome = run_episodes(folder, url, on_event=on_event)
        wall = time.perf_counter() - t0
        results = read_jsonl(folder / "results.jsonl")
        recorded = {f.stem: read_jsonl(f) for f in (folder / "recording").glob("draw-*.jsonl")}
    rows = []
    for r in results:
        key = (r["draw"], r["task"])
        s = scrapes.get(key, {})
        (sum0, n0), (sum1, n1) = s.get("episode_started", (0, 0)), s.get("episode_done", (0, 0))
        rec = [x["recorded"]["duration_s"] for x in recorded.get(r["recording_draw"], []) if x["task"] == r["task"]]
        calls = r.get("call_s") or []
        # the client's time per call (inspect records none for a call a limit cut off) against the recorder's
        timed = [(c, d) for c, d in zip(calls, rec) if c is not None]
        hop_ms = (sum(c for c, _ in timed) - sum(d for _, d in timed)) / len(timed) * 1000 if timed else None
        attributed = round(n1 - n0) == r["requests"] == len(rec)
        engine_s = sum1 - sum0
        server_ms = (sum(rec) - engine_s) / r["requests"] * 1000 if attributed else None
        rows.append(
            {
                "draw": r["draw"],
                "task": r["task"],
                "outcome": r["outcome"],
                "tool_call_mode": r.get("tool_call_mode"),
                "tool_calls": r.get("tool_calls"),
                "calls_in_sandbox": r.get("calls_in_sandbox"),
                "invalid_answers": r.get("invalid_answers"),
                "longest_prompt_tokens": r.get("longest_prompt_tokens"),
                "requests": r["requests"],
                "turns": r["turns"],
                "client_s": r["client_s"],
                "model_s": r["model_s"],
                "recorder_s": round(sum(rec), 6),
                "engine_s": round(engine_s, 6),
                "attributed": attributed,
                "overhead_ms_per_turn": round(hop_ms + server_ms, 2) if attributed and hop_ms is not None else None,
                "recorder_hop_ms": round(hop_ms, 2) if hop_ms is not None else None,
                "server_outside_e2e_ms": round(server_ms, 2) if server_ms is not None else None,
                "loop_ms_per_turn": round(
                    (r["client_s"] - r["model_s"] - (r["tool_s"] or 0)) / max(r["turns"], 1) * 1000, 2
                ),
            }
        )
    overheads = [x["overhead_ms_per_turn"] for x in rows if x["overhead_ms_per_turn"] is not None]
    payload = {
        "url": url,
        "suite": args.suite,
        "draws": args.draws,
        "status": outcome.status,
        "episodes": rows,
        "overhead_ms_per_turn_median": round(statistics.median(overheads), 2) if overheads else None,
        "recorder_hop_ms_median": round(
            statistics.median(x["recorder_hop_ms"] for x in rows if x["recorder_hop_ms"] is not None), 2
        )
        if overheads
        else None,
        "server_outside_e2e_ms_median": round(
            statistics.median(x["server_outside_e2e_ms"] for x in rows if x["server_outside_e2e_ms"] is not None), 2
        )
        if overheads
        else None,
        "loop_ms_per_turn_median": round(statistics.median(x["loop_ms_per_turn"] for x in rows), 2) if rows else None,
        "draw_wall_s": round(wall / args.draws, 2),
        "draw_client_s": round(sum(r["client_s"] or 0 for r in results) / args.draws, 2),
        "passed": sum(r["outcome"] == "pass" for r in results),
        "tool_calls": sum(r.get("tool_calls") or 0 for r in results),
        "invalid_answers": sum(r.get("invalid_answers") or 0 for r in results),
        "target_overhead_ms": 5.0,
        "peer": peer(url, served_model(url)),
    }
    if args.json:
        print(json.dumps(payload, indent=2))
        return 0
    print(
        f"{'TASK':<20} {'REQ':>3} {'CLIENT_S':>8} {'MODEL_S':>8} {'ENGINE_S':>8} {'OVERHEAD_MS/TURN':>16} "
        f"{'HOP_MS':>7} {'SERVER_MS':>9} {'LOOP_MS/TURN':>12}"
    )
    for x in rows:
        print(
            f"{x['task']:<20} {x['requests']:>3} {x['client_s']:>8.3f} {x['model_s']:>8.3f} {x['engine_s']:>8.3f} "
            f"{x['overhead_ms_per_turn'] if x['overhead_ms_per_turn'] is not None else '-':>16} "
            f"{x['recorder_hop_ms']:>7} {x['server_outside_e2e_ms'] if x['server_outside_e2e_ms'] is not None else '-':>9} "  # noqa: E501
            f"{x['loop_ms_per_turn']:>12}"
        )
    print(
        f"median overhead per turn (client - engine): {payload['overhead_ms_per_turn_median']} ms "
        f"(target < 5 ms): client side {payload['recorder_hop_ms_median']} ms, server outside e2e "
        f"{payload['server_outside_e2e_ms_median']} ms; inspect's loop {payload['loop_ms_per_turn_median']} ms/turn"
    )
    print(f"w01-mini draw: wall {payload['draw_wall_s']} s, client total {payload['draw_client_s']} s")
    modes = sorted({x["tool_call_mode"] for x in rows if x["tool_call_mode"]})
    print(
        f"tool calls ({', '.join(modes) or '-'}): {payload['tool_calls']}, refused answers "
        f"{payload['invalid_answers']}, passed {payload['passed']} of {len(rows)}"
    )
    p = payload["peer"]
    if "error" in p:
        print(f"peer: failed: {p['error']}")
    else:
        print(
            f"peer, same request straight to the engine (median): inspect generate {p['inspect_ms']} ms, bare httpx "
            f"{p['httpx_ms']} ms: inspect's own client cost {p['inspect_minus_httpx_ms']} ms per call"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
