"""The front-end parts, engine-free: outputs identical with each part off and on.

- The tail planner with the tiny model's real tokenizer (console venv, `tokenizers` only): tokenizers'
  own DecodeStream primed with the whole prompt against the planned tail, on random byte-level prompts and
  outputs; a cut that ignores the rule differs (so the comparison can fail), and a non-ByteLevel decoder is
  refused.
- vLLM's own FastIncrementalDetokenizer and block hasher, driven in the engine venv
  (tests/unit/front_end_engine_check.py): text, deltas, output token IDs and stop strings identical; verify
  catches a wrong cut and hands out vLLM's text; block hashes identical, a corrupted memo entry is caught.
- held-prompt: the common prefix and the choice of a held prompt (console venv); the two halves with vLLM's
  own request encoder and the engine core's typed decoder between them (engine venv): every prompt rebuilt
  equal, a deliberately wrong API-server half changes prompts and verify catches it, a lost reference and
  an engine core without the part fail the request.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
import tokenizers
from tokenizers.decoders import DecodeStream

from frank import paths
from frank.plugins.front_end.catalog import PARTS
from frank.plugins.front_end.detok_tail import CHAR_BYTES, TailPlanner
from frank.plugins.front_end.held_prompt import MIN_COMMON, HeldPrompts, choose_reference, common_prefix
from frank.plugins.front_end.switch import parse_verify

REPO = Path(__file__).resolve().parents[2]
ENGINE_PYTHON = paths.engine_venv_python()
needs_engine_venv = pytest.mark.skipif(not ENGINE_PYTHON.exists(), reason=f"no engine venv at {ENGINE_PYTHON}")


@pytest.fixture(scope="module")
def model_dir() -> Path:
    d = paths.models_dir() / "tiny-frank"
    if not (d / "tokenizer.json").exists():
        pytest.skip(f"no tiny model at {d} (make test-model)")
    return d


@pytest.fixture(scope="module")
def tok(model_dir) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))


def _steps(tok, stream: DecodeStream, outs: list[int]) -> list[str | None]:
    got: list[str | None] = []
    for t in outs:
        try:
            got.append(stream.step(tok, t))
        except Exception as exc:  # an error is an outcome too: it must be the same one
            got.append(f"error: {exc}")
    return got


def _random_cases(tok, n: int, seed: int):
    rng = random.Random(seed)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    byte_ids = [tok.token_to_id(c) for c in CHAR_BYTES]
    specials = list(range(32))
    for _ in range(n):

        def pick():
            r = rng.random()
            return rng.choice(byte_ids) if r < 0.6 else rng.choice(specials) if r < 0.7 else rng.randrange(vocab)

        yield [pick() for _ in range(rng.randint(1, 90))], [pick() for _ in range(rng.randint(1, 8))]


def test_tail_priming_gives_tokenizers_own_outputs(tok):
    planner = TailPlanner(tok)
    assert planner.refused is None
    used = 0
    for prompt, outs in _random_cases(tok, 1500, seed=1):
        for skip in (True, False):
            start, _why = planner.tail_start(prompt, skip)
            used += start > 0
            full = _steps(tok, DecodeStream(ids=prompt, skip_special_tokens=skip), outs)
            tail = _steps(tok, DecodeStream(ids=prompt[start:], skip_special_tokens=skip), outs)
            assert tail == full, (prompt, outs, skip, start)
    assert used > 1000  # most prompts do get a short tail


def test_a_cut_that_ignores_the_rule_differs(tok):
    """The comparison above can fail: cutting at a fixed distance breaks characters and the U+FFFD case."""
    differing = 0
    for prompt, outs in _random_cases(tok, 600, seed=2):
        start = max(1, len(prompt) - 3)
        full = _steps(tok, DecodeStream(ids=prompt, skip_special_tokens=True), outs)
        differing += _steps(tok, DecodeStream(ids=prompt[start:], skip_special_tokens=True), outs) != full
    assert differing > 20


def test_a_prompt_ending_mid_character_takes_the_whole_prompt(tok):
    planner = TailPlanner(tok)
    text_ids = tok.encode("plain ascii words " * 10, add_special_tokens=False).ids
    euro = "€".encode()  # three bytes: the prompt ends after the first two
    prompt = text_ids + [tok.token_to_id(_char_of(b)) for b in euro[:2]]
    assert planner.tail_start(prompt, True) == (0, "fallback_replacement_end")
    outs = [tok.token_to_id(_char_of(euro[2])), tok.token_to_id("a")]
    full = _steps(tok, DecodeStream(ids=prompt, skip_special_tokens=True), outs)
    assert full[0] and full[0].startswith("plain ascii words")  # tokenizers emits the whole primed text here
    naive = _steps(tok, DecodeStream(ids=prompt[-20:], skip_special_tokens=True), outs)
    assert naive != full


def test_a_cut_lands_before_continuation_bytes(tok):
    planner = TailPlanner(tok)
    text_ids = tok.encode("x " * 40, add_special_tokens=False).ids
    emoji = "🙂".encode()  # lead byte + three continuation bytes, one token each, just where the cut would go
    tail = [tok.token_to_id(_char_of(b)) for b in emoji] + tok.encode(" y" * 14, add_special_tokens=False).ids[:13]
    prompt = text_ids + tail
    start, why = planner.tail_start(prompt, True)
    assert why == "tail"
    assert start <= len(text_ids)  # moved back past the continuation bytes to the lead byte or before


def test_other_decoders_are_refused(model_dir):
    data = json.loads((model_dir / "tokenizer.json").read_text())
    data["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    planner = TailPlanner(tokenizers.Tokenizer.from_str(json.dumps(data)))
    assert planner.refused and "Metaspace" in planner.refused
    assert planner.tail_start(list(range(100, 200)), True) == (0, "fallback_decoder")


def test_verify_setting_is_parsed_strictly():
    assert parse_verify("X", "") == 0.0 and parse_verify("X", "all") == 1.0 and parse_verify("X", "0.25") == 0.25
    for bad in ("sometimes", "1.5", "-0.1"):
        with pytest.raises(ValueError, match="X="):
            parse_verify("X", bad)


def test_every_part_has_a_knob_in_the_full_scale_profile():
    from frank.engine.profiles import load_profile

    profile = load_profile("embedded-cpu-swa")
    for part in PARTS.values():
        knob = profile.knobs[part.knob]
        assert list(knob.values) == ["off", "on"] and knob.default == "off"
        assert (knob.env or knob.target) == part.env
        assert knob.apply == ("env" if part.process == "engine-core" else "live")


ENGINE_CHECKS = ("detok", "detok-naive-noverify", "detok-naive", "hashes", "held")


@pytest.fixture(scope="module")
def engine_checks(model_dir: Path) -> dict:
    """Every engine-venv check of this module, from one process: vLLM is imported once (most of a check's
    time) and each check runs in a child forked from it (tests/unit/front_end_engine_check.py)."""
    proc = subprocess.run(
        [
            str(ENGINE_PYTHON),
            str(REPO / "tests" / "unit" / "front_end_engine_check.py"),
            str(model_dir),
            *ENGINE_CHECKS,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@needs_engine_venv
def test_vllm_detokenizer_outputs_identical_with_the_part_on(engine_checks):
    r = engine_checks["detok"]
    assert r["differing"] == 0, r["example"]
    assert r["cases"] > 500 and r["stops_hit"] > 100  # stop strings held back and included, both
    assert r["counts"]["tail"] > 300 and r["counts"]["prompt_tokens_skipped"] > 1_000_000


@needs_engine_venv
def test_vllm_detokenizer_verify_catches_a_wrong_cut(engine_checks):
    wrong = engine_checks["detok-naive-noverify"]
    assert wrong["differing"] > 0  # a wrong cut does change vLLM's outputs...
    caught = engine_checks["detok-naive"]
    assert caught["differing"] == 0  # ...and verify hands out vLLM's own text instead
    assert caught["counts"]["mismatches"] > 0 and caught["counts"]["verified"] > 0


@needs_engine_venv
def test_vllm_block_hashes_identical_through_the_memo(engine_checks):
    r = engine_checks["hashes"]
    assert r["hooked"] and r["identical"], r
    assert r["hits"] > r["misses"] > 0
    assert r["mismatches_after_corruption"] == 1 and r["verified_identical"] and r["enabled_after_corruption"] is False


def test_common_prefix_finds_the_first_difference_at_any_place():
    rng = random.Random(5)
    a = [rng.randrange(50) for _ in range(30_000)]
    for n in (0, 1, 8191, 8192, 8193, 29_999):
        b = a[:n] + [99] + a[n + 1 :]
        assert common_prefix(a, b) == n and common_prefix(b, a) == n
    assert common_prefix(a, a[:100]) == 100 and common_prefix(a, list(a)) == 30_000


def test_the_longest_held_prefix_is_chosen_and_compared_in_full():
    rng = random.Random(6)
    a = [rng.randrange(50) for _ in range(30_000)]
    held = [(3, a[:5000], None), (2, [7] + a[1:], None), (1, a, None)]
    assert choose_reference(a + [1, 2], held)[0::2] == (1, 30_000)  # the whole earlier turn, not a shorter one
    assert choose_reference(a[:20_000] + [99] * 50, held)[0::2] == (1, 20_000)  # a longer partial beats 5000
    assert choose_reference([99] + a, held) is None  # differs at the first token
    assert choose_reference(a[: MIN_COMMON - 1] + [99] * 9000, held) is None  # too little in common
    # a held prompt that agrees at every screened place but differs in between is not taken whole
    sneaky = list(a)
    sneaky[12_345] = 99
    assert choose_reference(a + [1], [(1, sneaky, None)])[2] == 12_345


def test_the_engine_core_keeps_every_prompt_the_api_server_may_name():
    api, core = HeldPrompts(3), HeldPrompts(6)
    for n in (1, 2, 4, 3, 5, 7, 6, 8):  # held by the API server as sends return: out of order
        api.put(0, n, [n])
        api.put(1, n, [-n])
    for n in range(1, 9):  # rebuilt by the engine core in the order they were sent
        core.put(0, n, [n])
    assert [k for k, _ in api.newest_first(0)] == [8, 7, 6]
    assert {k for k, _ in api.newest_first(0)} <= {k for k, _ in core.newest_first(0)} == {3, 4, 5, 6, 7, 8}
    assert core.get(0, 2) is None and api.get(1, 8) == [-8]


@needs_engine_venv
def test_vllm_requests_rebuilt_equal_through_the_held_prompt(engine_checks):
    r = engine_checks["held"]
    right = r["right"]
    assert right["identical"] == right["requests"] == 49 and not right["errors"], right
    assert right["core"]["rebuilt"] == right["api"]["sent_delta"] >= 40  # deltas, not whole prompts
    assert right["api"]["sent_whole"] == right["core"]["received_whole"] == 6  # each conversation's first turn
    assert right["core"]["tokens_not_decoded"] > 300_000
    # block hashes of the common prefix taken from the held prompt, equal to vLLM's own for every request
    assert right["hashes_differ"] == 0 and right["core"]["hashes_reused"] > 2000
    # the rebuilt list grows with the output, vLLM's copy is the prompt and is held: every later turn rebuilt
    assert right["core"]["token_lists_swapped"] == right["core"]["rebuilt"] and right["all_token_ids_wrong"] == 0
    assert "Neither prompt_token_ids nor prompt_embeds" in right["unpatched_error"]  # fail-closed on the wire
    assert "held with None tokens" in right["lost_reference"] and right["kwargs_left"] == []
    wrong = r["wrong"]  # the part's fault drops a token: prompts change (or fail on a length the core
    assert wrong["identical"] == 7 and wrong["differing"] >= 6  # checks), so this check can fail...
    assert wrong["differing"] + wrong["error_count"] == 42 and wrong["core"].get("mismatches", 0) == 0
    caught = r["wrong_verified"]  # ...and verify serves the whole list instead
    assert caught["identical"] == 49 and caught["core"]["mismatches"] == caught["core"]["verified"] >= 40
    assert caught["hashes_differ"] == 0 and "hashes_reused" not in caught["core"]


def _char_of(byte: int) -> str:
    return next(c for c, b in CHAR_BYTES.items() if b == byte)
