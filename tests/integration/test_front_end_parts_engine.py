"""The detokenizer tail part inside the real embedded vLLM engine: flipped live, outputs identical.

Uses the shared session engine (parts at their default, off) and leaves the part off at the end. Each
request is generated greedily with the part off and then on, and everything the client gets is compared:
generated token IDs, text (streamed deltas joined, and whole), per-token logprobs with their top
alternatives, finish reasons and the stop strings that ended them. The part's counters must show that it
primed those requests with a tail (so the comparison is of two different paths, not of one path twice).
"""

from __future__ import annotations

import json
import secrets

import httpx
import pytest
import tokenizers

from frank import paths
from frank.engine.parts_client import PartsClient
from frank.plugins.front_end.detok_tail import CHAR_BYTES

pytestmark = pytest.mark.engine

CONTEXT = "Repository context follows.\n" + "".join(
    f"src/mod_{i}.py: def handler_{i}(req):  # ünï 🙂 漢字\n    return req.get('id') or {i}\n" for i in range(120)
)


def _mid_character_prompt() -> list[int]:
    """Token IDs of the context followed by the first two of the three bytes of "€" (one token each)."""
    tok = tokenizers.Tokenizer.from_file(str(paths.models_dir() / "tiny-frank" / "tokenizer.json"))
    char_of = {b: c for c, b in CHAR_BYTES.items()}
    return tok.encode(CONTEXT, add_special_tokens=False).ids + [tok.token_to_id(char_of[b]) for b in "€".encode()[:2]]


def _bodies() -> list[tuple[str, dict]]:
    chat = {"model": "tiny-frank", "temperature": 0.0, "max_tokens": 24}
    msgs = [{"role": "system", "content": CONTEXT}, {"role": "user", "content": "Fix handler_7. 🙂"}]
    return [
        ("/v1/chat/completions", {**chat, "messages": msgs, "logprobs": True, "top_logprobs": 3}),
        ("/v1/chat/completions", {**chat, "messages": msgs, "skip_special_tokens": False}),
        ("/v1/chat/completions", {**chat, "messages": msgs, "stream": True, "return_token_ids": True}),
        ("/v1/completions", {**chat, "prompt": CONTEXT + "price: 12 \u20ac", "logprobs": 2}),
        # a prompt ending mid-character: tokenizers' own corner case, where the whole prompt is primed
        ("/v1/completions", {**chat, "prompt": _mid_character_prompt(), "logprobs": 2}),
    ]


def _post(url: str, path: str, body: dict) -> dict:
    # a fresh prefix-cache namespace per request: a prompt computed whole each time, so the logprob values
    # compared below cannot differ by how much of the prompt came from vLLM's prefix cache
    body = {**body, "cache_salt": secrets.token_hex(8)}
    if not body.get("stream"):
        r = httpx.post(url + path, json={**body, "return_token_ids": True}, timeout=300)
        assert r.status_code == 200, r.text
        out = r.json()  # what the client is given, less what differs by request (id, timings, usage)
        return {"choices": out["choices"], "prompt_token_ids": out.get("prompt_token_ids")}
    deltas, ids, finish = [], [], None
    with httpx.stream("POST", url + path, json=body, timeout=300) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for choice in json.loads(line[6:]).get("choices") or ():
                deltas.append((choice.get("delta") or {}).get("content"))
                ids += choice.get("token_ids") or []
                finish = choice.get("finish_reason") or finish
    # the text the deltas add up to: where the stream cuts it depends on timing (how many tokens a verify step
    # accepted, how many outputs the server coalesced while the client read), not on the detokenizer
    return {"text": "".join(d or "" for d in deltas), "ids": ids, "finish": finish}


@pytest.fixture
def parts(engine):
    client = PartsClient(engine.status().url, engine.token)
    client.set_enabled("detok-tail", False)
    yield client
    engine.set_knob("detok_tail", "off")


def test_outputs_identical_with_the_detokenizer_tail_on_and_off(engine, parts):
    url = engine.status().url
    off = [_post(url, path, body) for path, body in _bodies()]
    # stop strings cut from the text the part-off run generated: held back, and included
    text = off[0]["choices"][0]["message"]["content"] or ""
    assert len(text) > 4, off[0]
    stops = [{"stop": [text[2:4]]}, {"stop": [text[2:4]], "include_stop_str_in_output": True}]
    stop_path, stop_body = _bodies()[0]
    off += [_post(url, stop_path, {**stop_body, **extra}) for extra in stops]
    assert off[-1]["choices"][0]["finish_reason"] == "stop"

    before = parts.part("detok-tail")["counts"]
    change = engine.set_knob("detok_tail", "on")  # the console's knob: live, no restart
    assert change.applied == "live" and parts.part("detok-tail")["enabled"] is True
    on = [_post(url, path, body) for path, body in _bodies()]
    on += [_post(url, stop_path, {**stop_body, **extra}) for extra in stops]
    for k, (a, b) in enumerate(zip(on, off)):
        assert a == b, (k, _first_difference(a, b))
    assert len(on) == len(off)

    counts = parts.part("detok-tail")["counts"]
    primed = counts.get("tail", 0) - before.get("tail", 0)
    assert primed == 6  # every request with a clean cut was primed with a tail (4 bodies, 2 stop strings)...
    assert counts.get("fallback_replacement_end", 0) - before.get("fallback_replacement_end", 0) == 1  # ...not €
    assert counts.get("prompt_tokens_skipped", 0) - before.get("prompt_tokens_skipped", 0) > primed * 2000
    assert counts.get("errors", 0) == 0 and counts.get("mismatches", 0) == 0
    metrics = httpx.get(f"{url}/metrics", timeout=10).text
    assert 'frank:front_end_enabled{part="detok-tail"} 1.0' in metrics

    engine.set_knob("detok_tail", "off")
    again = parts.part("detok-tail")["counts"].get("tail", 0)
    assert _post(url, *_bodies()[0]) == off[0]
    assert parts.part("detok-tail")["counts"].get("tail", 0) == again  # off: vLLM's own priming


def test_parts_control_needs_the_token(engine):
    url = engine.status().url
    assert httpx.get(f"{url}/frank/parts", timeout=10).status_code == 401
    r = httpx.post(f"{url}/frank/parts/detok-tail", json={"enabled": True}, headers={"X-Frank-Token": "x"}, timeout=10)
    assert r.status_code == 403
    assert PartsClient(url, engine.token).part("detok-tail")["enabled"] is False  # the refused POST changed nothing
    r = httpx.get(f"{url}/frank/parts/no-such-part", headers={"X-Frank-Token": engine.token}, timeout=10)
    assert r.status_code == 404 and "no live front-end part" in r.text
    # the engine-core part: its counters come from the engine core process; off at start, so nothing hooked
    memo = PartsClient(url, engine.token).part("block-hash-memo")
    assert memo["enabled"] is False and memo["counts"] == {"hits": 0, "misses": 0, "evictions": 0}
    r = httpx.post(
        f"{url}/frank/parts/block-hash-memo", json={"enabled": True}, headers={"X-Frank-Token": engine.token}
    )
    assert r.status_code == 405 and "restart knob" in r.text


def _first_difference(a, b, where: str = "") -> str:
    """Where two JSON values first differ, and how (for the failure message)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{where}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{where}[{i}]")
    return f"{where}: on {a!r:.200} / off {b!r:.200}"
