"""The region cache core with the tiny model's real tokenizer (its tokenizer.json through `tokenizers`).

`tokenizers` is a test extra of the console venv (the same 0.23.3 as the engine venv), so these tests run
in-process and fast; the HF wrapper path that vLLM calls is covered by the engine-venv frontend check
(tests/integration/test_region_cache_engine.py) and the integration tests on the real engine.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import threading

import pytest

tokenizers = pytest.importorskip("tokenizers", reason="pip install -e '.[test]' (tokenizers is a test extra)")

from frank.plugins.region_cache import core, runtime  # noqa: E402
from frank.plugins.region_cache.control import ControlMiddleware  # noqa: E402
from frank.plugins.region_cache.core import CacheLimits, RegionCache, RegionEncoder, RustAdapter, Splitter  # noqa: E402

U, A, S, BOS, EOS = "<｜User｜>", "<｜Assistant｜>", "<｜System｜>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
TCB, TC, SEP, TCE, TCSE = (
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
)

EDGE_CASES = [
    "",  # empty prompt
    U,  # only a control token
    U + A,  # adjacent control tokens (empty region between)
    BOS + S + U + A + "</think>",  # a run of them, plain added token last
    U + "hello",  # region at the end
    "hello" + U,  # region at the start
    "x" + U + "y" + A + "z",
    " " + U + " " + A + " ",  # whitespace next to tokens
    "\n\n" + U + "\n" + A + "\n\n\n",
    "héllo ünïcode 日本語 🙂 👍🏽 👨‍👩‍👧" + U + "Ελληνικά العربية עברית" + A + "∑∫√",
    U[:-1] + U + U[1:],  # partial tokens around a real one
    "<｜User" + "｜>",  # a token built from two string pieces is still a token
    "<｜User｜ >",  # not a token
    "｜DSML｜" + "<｜DSML｜ calls>" + "</｜DSML｜ calls>",  # overlapping plain added tokens (leftmost-longest)
    "<think>reasoning</think>answer" + EOS,
    TCB + TC + "function" + SEP + 'f\n```json\n{"a": 1}\n```' + TCE + TCSE,
    "tab\there" + U + "\r\nCRLF\r\n" + A,
    "a" * 5000 + U + "b " * 3000,
    "1234567890" + U + "3.14159" + A + "0x1F",
]


def _encoder(tiny_tokenizer_json, cache=None, **kw) -> RegionEncoder:
    return RegionEncoder(RustAdapter(tokenizers.Tokenizer.from_str(tiny_tokenizer_json)), cache or RegionCache(), **kw)


@pytest.fixture(scope="module")
def tok(tiny_tokenizer_json):
    return tokenizers.Tokenizer.from_str(tiny_tokenizer_json)


def fresh(tok, text: str, add_special_tokens: bool = False) -> list[int]:
    return tok.encode(text, add_special_tokens=add_special_tokens).ids


def test_the_tiny_tokenizer_is_accepted_and_cuts_at_its_control_tokens(tiny_tokenizer_json):
    enc = _encoder(tiny_tokenizer_json)
    assert enc.refused == ""
    assert {U, A, S, BOS, EOS, "<think>", "</think>", "｜DSML｜"} <= set(enc.splitter.atomic)
    assert enc.affixes == ([0], [])  # add_special_tokens=True puts BOS (id 0) in front


@pytest.mark.parametrize("text", EDGE_CASES, ids=range(len(EDGE_CASES)))
def test_edge_cases_equal_a_fresh_encode_cold_and_warm(tiny_tokenizer_json, tok, text):
    cache = RegionCache()
    enc = _encoder(tiny_tokenizer_json, cache)
    expected = fresh(tok, text)
    assert enc.encode(text) == expected  # cold: every region a miss
    assert enc.encode(text) == expected  # warm: every region a hit
    assert enc.encode(text, add_special_tokens=True) == fresh(tok, text, True)
    stats = cache.stats()
    assert stats["mismatches"] == 0 and stats["errors"] == 0
    if any(enc.splitter.split(text)[0]):
        assert stats["hits"] > 0


def test_splitter_cuts_leftmost_longest_and_keeps_empty_regions(tiny_tokenizer_json):
    enc = _encoder(tiny_tokenizer_json)
    regions, ids = enc.splitter.split(U + A + "x<｜DSML｜ calls>y")
    assert regions == ["", "", "x", "y"]
    assert ids == [enc.splitter.atomic[U], enc.splitter.atomic[A], enc.splitter.atomic["<｜DSML｜ calls>"]]
    assert Splitter([]).split("abc") == (["abc"], [])


def test_a_token_that_extends_another_wins_as_in_the_tokenizer(tiny_tokenizer_json):
    from tokenizers import AddedToken

    tok = tokenizers.Tokenizer.from_str(tiny_tokenizer_json)
    tok.add_special_tokens([AddedToken(U + "!", special=True, normalized=False)])  # U is its prefix
    enc = RegionEncoder(RustAdapter(tok), RegionCache())
    assert enc.refused == ""
    for text in (U + "!hi" + U, "a" + U + U + "!" + U + "!!", U + "!"):
        assert enc.encode(text) == fresh(tok, text), text


def test_the_find_scan_matches_the_leftmost_longest_regex(tiny_tokenizer_json):
    from tokenizers import AddedToken

    tok = tokenizers.Tokenizer.from_str(tiny_tokenizer_json)
    tok.add_special_tokens(
        [AddedToken(U + "!", special=True, normalized=False), AddedToken("<x", special=True, normalized=False)]
    )
    splitter = RegionEncoder(RustAdapter(tok), RegionCache()).splitter
    contents = list(splitter.atomic) + ["<", "｜", "<｜", "!", "x"]
    rng = random.Random(11)
    for _ in range(500):
        text = "".join(
            rng.choice(contents) if rng.random() < 0.5 else rng.choice("ab <>｜\n") for _ in range(rng.randint(0, 25))
        )
        regex = [(m.start(), m.group()) for m in splitter._pattern.finditer(text)]
        assert splitter.matches(text) == regex, text


def test_random_prompts_built_from_control_tokens_equal_a_fresh_encode(tiny_tokenizer_json, tok):
    enc = _encoder(tiny_tokenizer_json)
    controls = sorted(enc.splitter.atomic)
    alphabet = list("ab xyz\n\t.,{}\"'") + ["日本", "🙂", "é", "  ", "\n\n", "<", "｜", ">", "▁"]
    rng = random.Random(5)
    for _ in range(300):
        parts = [
            rng.choice(controls) if rng.random() < 0.3 else rng.choice(alphabet) for _ in range(rng.randint(0, 30))
        ]
        text = "".join(parts)
        assert enc.encode(text) == fresh(tok, text), text


def test_a_growing_conversation_hits_its_repeated_region(tiny_tokenizer_json, tok):
    cache = RegionCache()
    enc = _encoder(tiny_tokenizer_json, cache)
    system = "repository context line\n" * 2000
    prompt = BOS + S + system
    for turn in range(5):
        prompt += U + f"question {turn}" + A + "</think>" + f"answer {turn}" + EOS
        assert enc.encode(prompt + U) == fresh(tok, prompt + U)
    stats = cache.stats()
    big = len(fresh(tok, system))
    assert stats["hit_tokens"] >= 4 * big  # the system region was encoded once, then served four times
    assert stats["seconds_saved"] > 0


def test_chunks_are_proven_for_the_tiny_tokenizer_and_equal_a_fresh_encode(tiny_tokenizer_json, tok):
    enc = _encoder(tiny_tokenizer_json)
    assert enc.no_chunking == ""  # ByteLevel(GPT-2 regex, no prefix space), BPE, no normalizer
    rng = random.Random(3)
    pieces = ["def f(x):", "    return x", "}", "x\ty", "# ünï 🙂", "1234", "'s", "a.b", "  ", "", "日本", "--", "\r"]
    for _ in range(60):
        text = "\n".join(rng.choice(pieces) + rng.choice(["", "z", ";", " "]) for _ in range(rng.randint(1, 400)))
        cut = core.chunk_region(text, min_chars=1, mask=rng.choice([0, 1, 3]))
        assert "".join(cut) == text
        joined = [i for piece in cut for i in fresh(tok, piece)]
        assert joined == fresh(tok, text), cut[:3]


def test_a_changed_header_reuses_the_chunks_of_the_unchanged_context(tiny_tokenizer_json, tok):
    cache = RegionCache()
    enc = _encoder(tiny_tokenizer_json, cache)
    rng = random.Random(9)
    context = "\n".join(f"src/f{rng.randrange(10**6)}.py:{i}: value = compute(x, {i})" for i in range(3000))
    first = S + "Session 1, draw 1.\n" + context + U + "go" + A
    second = S + "Session 2, draw 2, longer header.\n" + context + U + "go" + A
    assert enc.encode(first) == fresh(tok, first)
    before = cache.stats()
    assert enc.encode(second) == fresh(tok, second)
    after = cache.stats()
    reused = after["hit_tokens"] - before["hit_tokens"]
    encoded = after["miss_tokens"] - before["miss_tokens"]
    assert reused > 10 * encoded  # only the chunk holding the header was encoded again


def test_chunk_cuts_are_the_same_in_every_process():
    # Python salts str hashes per process; a cut decided by hash() moved with PYTHONHASHSEED, and about one
    # seed in twenty left the header's chunk long enough to fail the reuse test above.
    probe = (
        "import random, sys; from frank.plugins.region_cache.core import chunk_region; rng = random.Random(9); "
        "text = '\\n'.join(f'line {rng.randrange(10**6)} = f({i})' for i in range(4000)); "
        "print([len(p) for p in chunk_region(text)])"
    )
    cuts = {
        subprocess.run(
            [sys.executable, "-c", probe],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "14", "34")
    }
    assert len(cuts) == 1
    assert len(json.loads(cuts.pop())) > 10  # it did cut


def test_chunking_is_refused_where_the_cut_is_not_proven():
    assert "pre-tokenizer" in core.chunking_refusal({"pre_tokenizer": {"type": "Metaspace"}, "model": {"type": "BPE"}})
    assert "normalizer" in core.chunking_refusal({"normalizer": {"type": "NFC"}})
    byte_level = {"type": "ByteLevel", "add_prefix_space": True, "use_regex": True}
    assert core.chunking_refusal({"pre_tokenizer": byte_level, "model": {"type": "BPE"}})
    ok = {"pre_tokenizer": dict(byte_level, add_prefix_space=False), "model": {"type": "BPE", "dropout": None}}
    assert core.chunking_refusal(ok) == ""
    assert "newline" in core.chunking_refusal(dict(ok, added_tokens=[{"content": "\n\n", "id": 9}]))
    assert core.chunking_refusal(dict(ok, model={"type": "BPE", "dropout": 0.1}))


def test_lru_is_bounded_by_tokens_and_by_bytes():
    cache = RegionCache(CacheLimits(max_tokens=10, max_bytes=10**9))
    cache.put(b"a", [1] * 6)
    cache.put(b"b", [1] * 4)
    assert cache.get(b"a") is not None  # a is now the most recent
    cache.put(b"c", [1] * 3)  # 13 > 10: evicts b, the least recently used
    assert cache.get(b"b") is None and cache.get(b"a") is not None and cache.get(b"c") is not None
    cache.put(b"huge", [1] * 11)  # larger than the whole cache: never stored, nothing evicted
    assert cache.get(b"huge") is None and cache.stats()["tokens_held"] == 9
    by_bytes = RegionCache(CacheLimits(max_tokens=10**9, max_bytes=2 * (core.entry_bytes(100) + core.key_bytes(b"1"))))
    for key in (b"1", b"2", b"3"):
        by_bytes.put(key, [7] * 100)
    stats = by_bytes.stats()
    assert stats["entries"] == 2 and stats["bytes_held"] <= stats["max_bytes"] and stats["evictions"] == 1
    by_bytes.clear()
    assert by_bytes.stats()["entries"] == 0 and by_bytes.stats()["tokens_held"] == 0


def test_a_keys_text_counts_against_the_byte_bound():
    """Keys hold the region's text: 3 entries of 100 tokens fit, but not with 100K-character texts."""
    room = 3 * (core.entry_bytes(100) + core.key_bytes((b"salt", "x")))
    small, big = (RegionCache(CacheLimits(max_tokens=10**9, max_bytes=room)) for _ in range(2))
    for i in range(3):
        small.put((b"salt", str(i)), [7] * 100)
        big.put((b"salt", str(i) * 100_000), [7] * 100)
    assert small.stats()["entries"] == 3 and small.stats()["evictions"] == 0
    assert big.stats()["entries"] == 0  # each entry alone is larger than the whole cache: never stored
    assert core.key_bytes((b"salt", "é" * 1000)) > core.key_bytes((b"salt", "e" * 1000))  # 2 bytes a char


def test_verify_mode_catches_a_poisoned_entry_returns_fresh_ids_and_refuses_from_then_on(tiny_tokenizer_json, tok):
    cache = RegionCache(CacheLimits(verify=1.0))
    enc = _encoder(tiny_tokenizer_json, cache)
    text = U + "the region" + A
    assert enc.encode(text) == fresh(tok, text)
    cache.put(enc.key("the region"), [5, 5, 5])  # already there: put keeps the stored IDs
    cache.clear()
    cache.put(enc.key("the region"), [5, 5, 5])  # poison it
    assert enc.encode(text) == fresh(tok, text)  # the fresh IDs, never the poisoned ones
    stats = cache.stats()
    assert stats["verified"] == 2 and stats["mismatches"] == 1
    assert enc.refused and enc.encode(text) is None  # plain path from now on
    assert cache.stats()["fallback_reasons"] == {"tokenizer_refused": 1}


def test_sampled_verify_checks_about_that_fraction(tiny_tokenizer_json):
    cache = RegionCache(CacheLimits(verify=0.25))
    enc = _encoder(tiny_tokenizer_json, cache, rng=random.Random(1))
    for i in range(400):
        enc.encode(U + f"p{i % 7}" + A)
    assert 60 <= cache.stats()["verified"] <= 140 and cache.stats()["mismatches"] == 0


def _metaspace_first_tokenizer():
    from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["[UNK]", AddedToken("<|u|>", special=True, normalized=False)],
        show_progress=False,
    )
    tok.train_from_iterator(["hello world foo bar " * 50, "the quick brown fox " * 50], trainer=trainer)
    return tok


def test_a_position_dependent_tokenizer_is_refused_and_falls_back():
    tok = _metaspace_first_tokenizer()
    text = "hello<|u|>world"
    # Why it must be refused: "world" alone gets the start-of-text prefix it does not get in place.
    assert (
        tok.encode("hello", add_special_tokens=False).ids
        + [tok.token_to_id("<|u|>")]
        + tok.encode("world", add_special_tokens=False).ids
        != tok.encode(text, add_special_tokens=False).ids
    )
    cache = RegionCache()
    enc = RegionEncoder(RustAdapter(tok), cache)
    assert "Metaspace" in enc.refused
    assert enc.encode(text) is None and cache.stats()["fallback_reasons"] == {"tokenizer_refused": 1}


def test_the_probe_alone_catches_a_tokenizer_the_static_rules_miss(monkeypatch):
    monkeypatch.setattr(core, "position_dependence", lambda config: "")
    enc = RegionEncoder(RustAdapter(_metaspace_first_tokenizer()), RegionCache())
    assert enc.refused.startswith("probe mismatch")


def test_concurrent_encodes_are_identical_and_counted(tiny_tokenizer_json, tok):
    cache = RegionCache(CacheLimits(max_tokens=2000))  # small: evictions race with lookups
    enc = _encoder(tiny_tokenizer_json, cache)
    prompts = [BOS + S + f"context {i % 5} " * 200 + U + f"q{i}" + A for i in range(40)]
    expected = [fresh(tok, p) for p in prompts]
    errors: list[str] = []

    def work(offset: int) -> None:
        for k in range(len(prompts)):
            i = (k + offset) % len(prompts)
            if enc.encode(prompts[i]) != expected[i]:
                errors.append(prompts[i][:40])

    threads = [threading.Thread(target=work, args=(n * 7,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    stats = cache.stats()
    assert stats["requests"] == 6 * 40 and stats["tokens_held"] <= 2000 and stats["evictions"] > 0


def test_limits_come_from_the_environment_and_bad_values_name_the_variable():
    limits = CacheLimits.from_env(
        {
            "FRANK_REGION_CACHE_MAX_TOKENS": "1_000",
            "FRANK_REGION_CACHE_MAX_BYTES": "4096",
            "FRANK_REGION_CACHE_VERIFY": "0.1",
        }
    )
    assert (limits.max_tokens, limits.max_bytes, limits.verify) == (1000, 4096, 0.1)
    assert CacheLimits.from_env({"FRANK_REGION_CACHE_VERIFY": "all"}).verify == 1.0
    assert CacheLimits.from_env({}).verify == 0.0
    with pytest.raises(ValueError, match="FRANK_REGION_CACHE_MAX_TOKENS"):
        CacheLimits.from_env({"FRANK_REGION_CACHE_MAX_TOKENS": "lots"})
    with pytest.raises(ValueError, match="FRANK_REGION_CACHE_VERIFY"):
        CacheLimits.from_env({"FRANK_REGION_CACHE_VERIFY": "2"})


# -- the control middleware (plain ASGI, driven directly) ----------------------------------------------


def _call(app, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b""):
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }
    asyncio.run(app(scope, receive, send))
    status = sent[0]["status"]
    payload = json.loads(sent[1]["body"]) if sent[1].get("body") else None
    return status, payload


def test_control_requires_the_token_and_flips_the_switch():
    passed: list[str] = []

    async def inner(scope, receive, send):
        passed.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    app = ControlMiddleware(inner, token="s3cret")
    good = {"X-Frank-Token": "s3cret"}
    assert _call(app, "GET", "/frank/region-cache")[0] == 401
    assert _call(app, "GET", "/frank/region-cache", {"X-Frank-Token": "nope"})[0] == 403
    assert _call(app, "GET", "/v1/models") == (204, None) and passed == ["/v1/models"]  # untouched
    status, stats = _call(app, "POST", "/frank/region-cache", good, b'{"enabled": true}')
    assert status == 200 and stats["enabled"] is True and runtime.enabled()
    status, stats = _call(app, "POST", "/frank/region-cache", good, b'{"enabled": false}')
    assert status == 200 and stats["enabled"] is False and not runtime.enabled()
    assert _call(app, "POST", "/frank/region-cache", good, b'{"enabled": "yes"}')[0] == 400
    assert _call(app, "POST", "/frank/region-cache", good, b"not json")[0] == 400
    runtime.cache().put(b"k", [1, 2, 3])
    status, stats = _call(app, "POST", "/frank/region-cache/clear", good)
    assert status == 200 and stats["entries"] == 0
    assert _call(app, "DELETE", "/frank/region-cache", good)[0] == 405
    assert _call(app, "GET", "/frank/region-cache/other", good)[0] == 404
    hits = runtime.cache().stats()["hits"]
    runtime.cache().record_lookup(hits=2, hit_tokens=6, misses=1, miss_tokens=3, miss_seconds=0.01, lookup_seconds=0.0)
    assert _call(app, "GET", "/frank/region-cache", good)[1]["hits"] == hits + 2  # the live counters, not a copy


def test_control_refuses_everything_without_a_server_token():
    async def inner(scope, receive, send):  # pragma: no cover - must not be reached
        raise AssertionError("passed through")

    app = ControlMiddleware(inner, token="")
    assert _call(app, "GET", "/frank/region-cache", {"X-Frank-Token": ""})[0] == 403
    assert _call(app, "POST", "/frank/region-cache/clear")[0] == 403


def test_the_engine_side_modules_import_only_the_stdlib_and_prometheus_client():
    """They load inside the vLLM API server: no console-side packages may come in with them."""
    import subprocess
    import sys

    code = (
        "import sys; before = set(sys.modules); "
        "import frank.plugins.region_cache.core, frank.plugins.region_cache.runtime, "
        "frank.plugins.region_cache.control, frank.plugins.region_cache.plugin, frank.plugins.region_cache.metrics; "
        "bad = ('textual', 'console', 'psutil', 'platformdirs', 'httpx', 'rich', 'numpy', 'scipy', 'vllm'); "
        "print(','.join(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in bad)))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_register_outside_an_api_server_process_installs_nothing(monkeypatch):
    from frank.plugins.region_cache import plugin

    monkeypatch.setattr(plugin.multiprocessing, "parent_process", lambda: object())
    monkeypatch.setattr(plugin.multiprocessing, "current_process", lambda: type("P", (), {"name": "EngineCore_DP0"})())
    called = []
    monkeypatch.setattr(plugin, "install", lambda: called.append(1))
    plugin.register()
    assert called == []
    monkeypatch.setattr(plugin.multiprocessing, "current_process", lambda: type("P", (), {"name": "ApiServer_1"})())
    plugin.register()
    assert called == [1]


class _FaultyRenderer:
    """A renderer whose tokenizer lookup raises: a fault the real vLLM renderer cannot produce on demand."""

    def _wants_offsets(self, prompt, params):
        return False

    def get_tokenizer(self):
        raise RuntimeError("boom")


class _Params:
    def get_encode_kwargs(self):
        return {"truncation": False, "max_length": None, "add_special_tokens": False}


def test_an_error_inside_the_hook_falls_back_and_is_counted():
    from frank.plugins.region_cache import plugin

    before = runtime.cache().stats()["errors"]
    assert plugin._cached_tokens_prompt(_FaultyRenderer(), {"prompt": "x"}, _Params()) is None
    assert runtime.cache().stats()["errors"] == before + 1
    # not text, or offsets wanted: the plain path, counted as a fallback
    assert plugin._cached_tokens_prompt(_FaultyRenderer(), {"prompt_token_ids": [1]}, _Params()) is None
    assert runtime.cache().stats()["fallback_reasons"].get("not_text", 0) >= 1


def test_split_by_chars_keeps_order_and_balances_length():
    texts = ["a" * 10, "b" * 30, "c" * 5, "d" * 25, "e" * 30]
    groups = core._split_by_chars(texts, 2)
    assert [t for g in groups for t in g] == texts  # contiguous, order kept
    assert len(groups) == 2 and abs(sum(map(len, groups[0])) - sum(map(len, groups[1]))) <= 30
    assert core._split_by_chars(texts, 1) == [texts]
    assert core._split_by_chars(["x"], 4) == [["x"]]


def test_threaded_miss_encode_equals_one_call(tiny_tokenizer_json, tok, monkeypatch):
    """A big miss is encoded over threads; the IDs, in order, equal one batch call and fresh encodes."""
    from frank.engine.models.tiny_corpus import corpus

    docs = list(corpus(n_docs=300, seed=5))
    pieces = ["\n".join(docs[i::6]) for i in range(6)]
    monkeypatch.setattr(core, "PARALLEL_MIN_CHARS", 10**12)
    one_call = core._fast_batch_encoder(tiny_tokenizer_json)(pieces)
    monkeypatch.setattr(core, "ENCODE_THREADS", 3)
    monkeypatch.setattr(core, "PARALLEL_MIN_CHARS", 0)
    threaded = core._fast_batch_encoder(tiny_tokenizer_json)(pieces)
    assert threaded == one_call == [fresh(tok, p) for p in pieces]
