"""The region cache inside the real embedded vLLM engine: flipped live, identical token IDs, stats, auth.

Uses the shared session engine (started with region_cache at its default, off) and leaves it off and
cleared at the end, so other tests see vLLM's own path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from frank.engine.region_cache_client import RegionCacheClient

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[2]
SYSTEM = "You are a careful engineer. Repository context follows.\n" + "".join(
    f"src/module_{i}.py: def handler_{i}(request, retries=3):\n    return request.get('id') or {i}  # ünï 🙂\n"
    for i in range(300)
)


def _messages(question: str) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Find the bug in handler_7."},
        {
            "role": "assistant",
            "content": "Looking at it.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "src/module_7.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "def handler_7(request, retries=3): ..."},
        {"role": "user", "content": question},
    ]


def _tokenize_chat(url: str, question: str) -> list[int]:
    r = httpx.post(
        f"{url}/tokenize",
        json={"model": "tiny-frank", "messages": _messages(question), "add_generation_prompt": True},
        timeout=60,
    )
    r.raise_for_status()
    return r.json()["tokens"]


def _tokenize_text(url: str, prompt: str) -> list[int]:
    r = httpx.post(f"{url}/tokenize", json={"model": "tiny-frank", "prompt": prompt}, timeout=60)
    r.raise_for_status()
    return r.json()["tokens"]


@pytest.fixture
def rc(engine):
    status = engine.status()
    client = RegionCacheClient(status.url, engine.token)
    client.set_enabled(False)
    client.clear()
    yield client
    engine.set_knob("region_cache", "off")
    client.clear()


def test_control_refuses_requests_without_the_token(engine):
    url = engine.status().url
    assert httpx.get(f"{url}/frank/region-cache", timeout=10).status_code == 401
    assert httpx.get(f"{url}/frank/region-cache", headers={"X-Frank-Token": "wrong"}, timeout=10).status_code == 403
    r = httpx.post(f"{url}/frank/region-cache", json={"enabled": True}, headers={"X-Frank-Token": ""}, timeout=10)
    assert r.status_code in (401, 403)
    assert RegionCacheClient(url, engine.token).stats()["enabled"] is False  # the refused POST changed nothing


def test_flipped_live_the_token_ids_stay_identical_and_the_stats_move(engine, rc):
    url = engine.status().url
    questions = ["Where is the bug?", "And in handler_8? 日本語 🙂", ""]
    text_prompt = "<｜User｜>" + SYSTEM + "<｜Assistant｜></think>"
    rc.clear()  # the shared engine: other tests may have used the cache; counts below are deltas from here
    s0 = rc.stats()
    off_chat = [_tokenize_chat(url, q) for q in questions]
    off_text = _tokenize_text(url, text_prompt)
    assert rc.stats()["requests"] == s0["requests"]  # off: vLLM's own path, the cache never ran

    change = engine.set_knob("region_cache", "on")  # the console's knob: live, no restart
    assert change.applied == "live" and rc.stats()["enabled"] is True
    for _ in range(2):  # cold, then warm
        assert [_tokenize_chat(url, q) for q in questions] == off_chat
        assert _tokenize_text(url, text_prompt) == off_text
    stats = rc.stats()
    delta = {k: stats[k] - s0[k] for k in ("requests", "hits", "misses", "mismatches", "errors", "hit_tokens")}
    assert delta["requests"] == 8 and delta["hits"] > 0 and delta["misses"] > 0
    assert delta["mismatches"] == 0 and delta["errors"] == 0 and stats["entries"] > 0
    assert delta["hit_tokens"] > len(off_text)  # the system region came from the cache

    # A chat completion through the cache (one output token: the cache acts before the engine runs).
    skipped = rc.stats()["checks_skipped"]
    r = httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": "tiny-frank", "messages": _messages("Fix it."), "max_tokens": 1},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["prompt_tokens"] == len(_tokenize_chat(url, "Fix it."))
    assert rc.stats()["requests"] == s0["requests"] + 10
    # vLLM's vocabulary check was skipped for the cache's own IDs, and only for them: token IDs that a
    # client sends are still checked with the cache on.
    assert rc.stats()["checks_skipped"] == skipped + 1
    r = httpx.post(
        f"{url}/v1/completions", json={"model": "tiny-frank", "prompt": [5, 10_000_000], "max_tokens": 1}, timeout=60
    )
    assert r.status_code == 400 and "out of vocabulary" in r.text, r.text
    assert rc.stats()["checks_skipped"] == skipped + 1

    metrics = httpx.get(f"{url}/metrics", timeout=10).text
    hits = [line for line in metrics.splitlines() if line.startswith("frank:region_cache_hits_total")]
    assert hits and float(hits[0].split()[-1]) == rc.stats()["hits"]
    assert "frank:region_cache_enabled 1.0" in metrics

    cleared = rc.clear()
    assert cleared["entries"] == 0 and cleared["tokens_held"] == 0
    engine.set_knob("region_cache", "off")
    before = rc.stats()["requests"]
    assert _tokenize_text(url, text_prompt) == off_text
    assert rc.stats()["requests"] == before  # off again: the cache is not consulted


def test_frontend_ids_identical_on_every_w01_mini_request_in_both_tokenizer_modes():
    """vLLM's renderer in-process (engine venv), cache off vs on, every request of one W01 mini draw."""
    cmd = [
        sys.executable,
        str(REPO / "benchmarks" / "bench_region_cache_frontend.py"),
        "--scale",
        "mini",
        "--draws",
        "draw-1",
        "--modes",
        "hf,deepseek_v41",
        "--json",
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    for mode in ("hf", "deepseek_v41"):
        m = result["modes"][mode]
        assert m["ids_identical"] and m["mismatched_requests"] == 0, (mode, m["mismatched_ids"])
        assert m["arms"]["on"]["hits"] > 0 and m["arms"]["on"]["errors"] == 0
