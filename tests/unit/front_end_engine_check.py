"""Runs in the engine venv (tests/unit/test_front_end_parts.py starts it): vLLM's own detokenizer and block
hasher driven directly with the tiny model's tokenizer, each front-end part off and on. Prints one JSON object,
each WHAT's result under its name.

    .venv-engine/bin/python tests/unit/front_end_engine_check.py MODEL_DIR WHAT [WHAT ...]

WHAT: detok (the part off vs on), detok-verify (on, verifying every request), detok-naive (a wrong cut with
verify on: caught and corrected), detok-naive-noverify (a wrong cut alone: outputs differ), hashes, held.

vLLM is imported once (most of a check's time) and each WHAT runs in a child forked from that process, so no
check sees the parts another installed or patched; the children run side by side.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any


def _tokenizer(model_dir: str) -> Any:
    from vllm.tokenizers import get_tokenizer
    from vllm.v1.engine.detokenizer import uses_fast_detokenizer

    tok = get_tokenizer(model_dir)
    assert uses_fast_detokenizer(tok), type(tok)
    return tok


def _prompts(tok: Any, rng: random.Random) -> list[list[int]]:
    """Chat prompts as the server builds them, plus raw ones ending in stray UTF-8 bytes."""
    text = "Repository context:\n" + "".join(f"def f_{i}(x):  # ünï 🙂 {i}\n    return x * {i}\n" for i in range(400))
    prompts = []
    for question in ("Fix f_7.", "Wörter? 🙂", "Why\n\n", " trailing space "):
        messages = [{"role": "system", "content": text}, {"role": "user", "content": question}]
        rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompts.append(tok.encode(rendered, add_special_tokens=False))
    byte_ids = [tok.convert_tokens_to_ids(c) for c in _byte_alphabet()]
    vocab = len(tok)
    for _ in range(40):  # random tails: bytes that start, continue or break UTF-8 characters, specials
        base = list(prompts[rng.randrange(len(prompts))])
        base += [
            rng.choice(byte_ids) if rng.random() < 0.7 else rng.randrange(vocab) for _ in range(rng.randint(1, 40))
        ]
        prompts.append(base)
    return prompts


def _byte_alphabet() -> list[str]:
    from frank.plugins.front_end.detok_tail import CHAR_BYTES

    return sorted(CHAR_BYTES)


def _outputs(tok: Any, rng: random.Random) -> list[list[int]]:
    byte_ids = [tok.convert_tokens_to_ids(c) for c in _byte_alphabet()]
    vocab = len(tok)
    emoji = tok.encode("🙂 ü € 漢字", add_special_tokens=False)
    outs = [emoji, list(reversed(emoji))]
    for _ in range(30):
        n = rng.randint(1, 12)
        outs.append([rng.choice(byte_ids + emoji) if rng.random() < 0.6 else rng.randrange(vocab) for _ in range(n)])
    return outs


def _run(tok: Any, prompt: list[int], out: list[int], params: dict[str, Any]) -> dict[str, Any]:
    from vllm.sampling_params import SamplingParams
    from vllm.v1.engine import EngineCoreRequest
    from vllm.v1.engine.detokenizer import IncrementalDetokenizer

    request = EngineCoreRequest(
        request_id="r",
        prompt_token_ids=list(prompt),
        mm_features=None,
        sampling_params=SamplingParams(max_tokens=len(out) + 1, **params),
        pooling_params=None,
        arrival_time=0.0,
        lora_request=None,
        cache_salt=None,
        data_parallel_rank=None,
    )
    detok = IncrementalDetokenizer.from_new_request(tok, request)
    deltas, stop = [], None
    for i, token in enumerate(out):
        stop = detok.update([token], stop_terminated=False)
        deltas.append(detok.get_next_output_text(finished=stop is not None or i == len(out) - 1, delta=True))
        if stop is not None:
            break
    return {"deltas": deltas, "text": detok.output_text, "ids": list(detok.output_token_ids), "stop": stop}


def check_detok(model_dir: str, verify: bool, naive: bool) -> dict[str, Any]:
    import tokenizers.decoders  # noqa: F401  (vLLM's module-level lookup)

    from frank.plugins.front_end import detok_tail

    tok = _tokenizer(model_dir)
    rng = random.Random(7)
    prompts, outs = _prompts(tok, rng), _outputs(tok, rng)
    cases = []
    for prompt in prompts:
        for out in rng.sample(outs, 6):
            for skip in (True, False):
                cases.append((prompt, out, {"skip_special_tokens": skip}))
    # stop strings: cut from vLLM's own text of the case, held back or included
    detok_tail.switch.set_enabled(False)
    for prompt, out, params in list(cases[:120]):
        text = _run(tok, prompt, out, params)["text"]
        if len(text) >= 3:
            k = rng.randrange(len(text) - 2)
            for include in (False, True):
                cases.append(
                    (prompt, out, {**params, "stop": [text[k : k + 2], "never"], "include_stop_str_in_output": include})
                )
    detok_tail.install()
    if verify:
        detok_tail.switch.verify = 1.0
    if naive:  # a cut that ignores the continuation-byte rule: verify must catch what it gets wrong
        detok_tail.TailPlanner.tail_start = lambda self, ids, skip: (max(1, len(ids) - 2), "tail")
    results_off, results_on = [], []
    for prompt, out, params in cases:
        detok_tail.switch.set_enabled(False)
        results_off.append(_run(tok, prompt, out, params))
        detok_tail.switch.set_enabled(True)
        results_on.append(_run(tok, prompt, out, params))
    differing = [i for i, (a, b) in enumerate(zip(results_off, results_on)) if a != b]
    counts = detok_tail.switch.snapshot()["counts"]
    return {
        "cases": len(cases),
        "stop_cases": sum(1 for _, _, p in cases if p.get("stop")),
        "stops_hit": sum(1 for r in results_off if r["stop"]),
        "differing": len(differing),
        "example": [results_off[differing[0]], results_on[differing[0]]] if differing else None,
        "counts": counts,
    }


def check_hashes(model_dir: str) -> dict[str, Any]:
    from vllm.utils.hashing import sha256
    from vllm.v1.core import kv_cache_utils
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash

    from frank.plugins.front_end import block_hash_memo

    init_none_hash(sha256)
    rng = random.Random(3)
    base = [rng.randrange(8192) for _ in range(128 * 40 + 17)]
    turns = [base, base + [rng.randrange(8192) for _ in range(128 * 5 + 3)], base[: 128 * 20] + [1, 2, 3] * 100]

    class _Req:  # what vLLM's request hasher reads from a Request
        def __init__(self, ids: list[int], salt: str | None) -> None:
            self.block_hashes: list[Any] = []
            self.all_token_ids = ids
            self.num_tokens = len(ids)
            self.mm_features: list[Any] = []
            self.lora_request = None
            self.cache_salt = salt
            self.prompt_embeds = None
            self.prompt_is_token_ids = None

    def all_hashes() -> list[list[bytes]]:
        hasher = get_request_block_hasher(128, sha256)
        return [hasher(_Req(t, salt)) for salt in (None, "salt-a", "salt-b") for t in turns for _ in range(2)]

    plain = all_hashes()
    block_hash_memo.install()
    block_hash_memo.set_enabled(True)
    memo = all_hashes()
    stats = block_hash_memo.snapshot()
    # a corrupted entry: verify must count it, hand out vLLM's hash and turn the memo off
    block_hash_memo.switch.verify = 1.0
    key = next(iter(block_hash_memo._memo))
    block_hash_memo._memo[key] = b"\x00" * 32
    verified = all_hashes()
    after = block_hash_memo.snapshot()
    return {
        "identical": memo == plain,
        "verified_identical": verified == plain,
        "hits": stats["counts"]["hits"],
        "misses": stats["counts"]["misses"],
        "mismatches_after_corruption": after["counts"].get("mismatches", 0),
        "enabled_after_corruption": after["enabled"],
        "blocks": sum(len(h) for h in plain),
        "hooked": getattr(kv_cache_utils.hash_block_tokens, "_frank_block_hash_memo", False),
    }


def check_held(model_dir: str, wrong: bool, verify: bool) -> dict[str, Any]:
    """held-prompt: vLLM's own request encoder and the engine core's typed decoder between the two halves.

    Six interleaved conversations whose turns grow (and one whose history is cut and rewritten), sent
    through the API-server half, msgpack, and the engine-core half: every rebuilt prompt must equal the one
    sent. `wrong` makes the API-server half deliberately wrong with the part's own fault (every delta loses
    the last common token); with verify on, the engine core must catch it and serve the whole list."""
    import types

    import msgspec
    from vllm import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.engine import EngineCoreRequest
    from vllm.v1.request import Request
    from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

    from frank.plugins.front_end import held_prompt as hp

    init_none_hash(sha256)
    # the engine core as preprocess_add_request sees it: vLLM's own request hasher and Request (less the
    # multimodal cache and structured output, which these requests do not use)
    core = types.SimpleNamespace(request_block_hasher=get_request_block_hasher(128, sha256))

    def vllm_preprocess(core: Any, req: Any) -> tuple[Any, int]:
        return Request.from_engine_core_request(req, core.request_block_hasher), 0

    encoder, decoder = MsgpackEncoder(), MsgpackDecoder(EngineCoreRequest)
    for held in (hp._held, hp._core_held, hp._core_hashes):  # a fresh pair of halves for each scenario
        held.clear()
    for sw in (hp.switch, hp.core_switch):
        sw._counts.clear()
    hp.switch.set_enabled(True)
    hp.switch.verify = 1.0 if verify else 0.0
    hp.switch.set_fault(hp.FAULT_TOKEN_DROPPED if wrong else None)
    rng = random.Random(7)
    convs = [[rng.randrange(8192) for _ in range(rng.randrange(5000, 9000))] for _ in range(6)]
    sent: list[list[int]] = []
    for turn in range(8):
        for c in range(6):
            if c == 5 and turn == 4:  # a rewritten history: a shorter common prefix with the held turn
                convs[c] = convs[c][: len(convs[c]) // 2] + [rng.randrange(8192) for _ in range(100)]
            convs[c] = convs[c] + [rng.randrange(8192) for _ in range(rng.randrange(200, 900))]
            sent.append(list(convs[c]))
    sent.append(sent[-1][: hp.MIN_TOKENS - 1])  # too short to hold: goes whole without a delta
    rebuilt: list[list[int] | None] = []
    errors: list[str] = []
    unpatched_error = None

    def request(rid: str, ids: list[int], salt: str | None = None) -> Any:
        return EngineCoreRequest(
            request_id=rid,
            prompt_token_ids=ids,
            mm_features=None,
            sampling_params=SamplingParams(max_tokens=4),
            pooling_params=None,
            arrival_time=0.0,
            lora_request=None,
            cache_salt=salt,
            data_parallel_rank=None,
        )

    hashes_differ = grown = 0
    for k, ids in enumerate(sent):
        salt = "salt-x" if k % 6 == 3 else None  # one conversation in its own prefix-cache namespace
        req = request(f"r{k}", ids, salt)
        if not hp._eligible(req):
            wire = req
        else:
            number, wire, hold = hp.plan(0, req)
            if hold or wrong:  # the fault's requests held anyway: the wrong half keeps going
                hp.hold_sent(0, number, ids)
        decoded = decoder.decode(encoder.encode(wire))
        if decoded.prompt_token_ids is None and unpatched_error is None:  # an engine core without the part
            try:
                Request.from_engine_core_request(decoded, None)
            except Exception as exc:
                unpatched_error = f"{type(exc).__name__}: {exc}"
        try:
            if decoded.reasoning_parser_kwargs and hp.KEY in decoded.reasoning_parser_kwargs:
                made, _ = hp.preprocess_delta(core, decoded, vllm_preprocess)
            else:
                made, _ = vllm_preprocess(core, decoded)
            # the block hashes vLLM computes for the prompt the client sent, without the part
            own, _ = vllm_preprocess(core, msgspec.structs.replace(req, prompt_token_ids=list(ids)))
            hashes_differ += made.block_hashes != own.block_hashes and decoded.prompt_token_ids == ids
            # output tokens grow the request's own list, never its prompt nor the prompt held for the next turn
            made.append_output_token_ids([11, 12])
            rebuilt.append(list(made.prompt_token_ids))
            grown += list(made.all_token_ids) != list(made.prompt_token_ids) + [11, 12]
        except hp.HeldPromptError as exc:
            errors.append(str(exc))
            rebuilt.append(None)
    api_counts, core_counts = hp.switch.snapshot()["counts"], hp.core_snapshot()["counts"]
    # a delta against a prompt the engine core does not hold fails the request, never guesses
    hp._core_held.clear()
    number, wire, _ = hp.plan(0, request("lost", sent[-2]))
    try:
        hp.rebuild(0, decoder.decode(encoder.encode(wire)))
        lost = "rebuilt"
    except hp.HeldPromptError as exc:
        lost = str(exc)
    return {
        "requests": len(sent),
        "identical": sum(1 for a, b in zip(sent, rebuilt) if a == b),
        "differing": sum(1 for a, b in zip(sent, rebuilt) if b is not None and a != b),
        "errors": errors[:3],
        "error_count": len(errors),
        "hashes_differ": hashes_differ,
        "all_token_ids_wrong": grown,
        "api": api_counts,
        "core": core_counts,
        "unpatched_error": unpatched_error,
        "lost_reference": lost,
        "kwargs_left": [k for k in (decoded.reasoning_parser_kwargs or {})],
    }


def check(model_dir: str, what: str) -> dict[str, Any]:
    if what == "hashes":
        return check_hashes(model_dir)
    if what == "held":  # right, wrong, wrong with verify: the held-prompt part keeps no state between them
        return {
            "right": check_held(model_dir, wrong=False, verify=False),
            "wrong": check_held(model_dir, wrong=True, verify=False),
            "wrong_verified": check_held(model_dir, wrong=True, verify=True),
        }
    if what in ("detok", "detok-verify", "detok-naive", "detok-naive-noverify"):
        return check_detok(model_dir, verify=what in ("detok-verify", "detok-naive"), naive="naive" in what)
    raise SystemExit(f"unknown check {what!r}")


def _import_vllm() -> None:
    """What the checks import from vLLM, imported before they fork (the parts themselves are not installed)."""
    import msgspec  # noqa: F401
    import tokenizers.decoders  # noqa: F401
    import vllm.sampling_params  # noqa: F401
    import vllm.tokenizers  # noqa: F401
    import vllm.utils.hashing  # noqa: F401
    import vllm.v1.core.kv_cache_utils  # noqa: F401
    import vllm.v1.engine.detokenizer  # noqa: F401
    import vllm.v1.request  # noqa: F401
    import vllm.v1.serial_utils  # noqa: F401


def main() -> int:
    model_dir, whats = sys.argv[1], sys.argv[2:]
    _import_vllm()
    with tempfile.TemporaryDirectory() as tmp:
        children = {}
        for what in whats:
            out = Path(tmp) / f"{len(children)}.json"
            pid = os.fork()
            if pid == 0:  # the child: one check, its result in its own file
                code = 1
                try:
                    out.write_text(json.dumps(check(model_dir, what), default=str))
                    code = 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            children[what] = (pid, out)
        results, failed = {}, []
        for what, (pid, out) in children.items():
            _, status = os.waitpid(pid, 0)
            if os.waitstatus_to_exitcode(status) == 0:
                results[what] = json.loads(out.read_text())
            else:
                failed.append(what)
    if failed:
        print(f"checks failed: {', '.join(failed)} (tracebacks above)", file=sys.stderr)
        return 1
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
