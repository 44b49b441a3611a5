"""The front end's per-request work on a full-scale prompt, engine-free: what each exact cut would save.

Runs in the engine venv (re-runs itself there from the console venv) and times, per request of a synthetic
W01-like conversation (turns growing from about 105K to 170K tokens, each extending the last one, one
cache_salt per draw as vLLM's first-block extra key):

- detokenizer: vLLM's own `IncrementalDetokenizer` for the request (set-up and the first output tokens'
  `update`, where the whole prompt is decoded) with `frank.plugins.front_end.detok_tail` off and on, using
  the tiny model's tokenizer (`--model-dir`); the output texts must be identical;

- hand-off: msgspec decode of the prompt IDs as vLLM sends them (an EngineCoreRequest's `list[int]`), against
  sending them as packed bytes and rebuilding the list (`array.tolist`, `numpy.frombuffer(...).tolist`).
  Every variant must rebuild a list of the same ints (checked), because vLLM's Request keeps one; and the
  held-prompt delta (`frank.plugins.front_end.held_prompt`): the API server's choice of the held previous
  turn (a full comparison) and encode of (ref, common, suffix), the engine core's decode and rebuild
  `held[:common] + suffix` (later turns only: a first turn goes whole). The previous turn's list shares its
  int objects with the next one, as the region cache's joined chunk lists do;
- block hashes: vLLM's own `get_request_block_hasher` (pickle + SHA-256 per block, `--prefix-caching-hash-algo`
  sha256) against the same hasher through `frank.plugins.front_end.block_hash_memo` (a bounded memo keyed by
  the hash function's whole input: parent hash, block token tuple, extra keys). The hashes are compared
  block by block: they must be identical.

`--sections w01` times the hand-off on W01 full's real prompts instead (one draw, 45 requests, each rendered
by vLLM's own renderer through the region cache, so each ID list is the cache's join with its record):
vLLM's encode/decode of the whole prompt against held-prompt's choice of the held turn (before: compared
in full; now: region by region) and delta, and the engine core's rebuild next to vLLM's own copy of the
prompt in its Request. Every choice is checked against the full comparison, every rebuilt prompt against
the one sent.

    .venv/bin/python benchmarks/bench_front_end_parts.py [--turns 8] [--repeat 5] [--sections synthetic,w01] [--json]
"""

from __future__ import annotations

import argparse
import array
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from engine_venv_env import frontend_worker_env

REPO = Path(__file__).resolve().parent.parent
BLOCK = 128  # the embedded profiles' block size on the CPU backend (vLLM's CPU default)
VOCAB = 8192


def _conversation(turns: int, seed: int) -> list[list[int]]:
    """Prompts of one conversation: the first about 105K tokens, each next one the last plus about 9K."""
    rng = random.Random(seed)
    prompt = [rng.randrange(VOCAB) for _ in range(105_000)]
    out = [list(prompt)]
    for _ in range(turns - 1):
        prompt = prompt + [rng.randrange(VOCAB) for _ in range(65_000 // max(1, turns - 1))]
        out.append(list(prompt))
    return out


def _median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def _handoff(prompts: list[list[int]], repeat: int) -> dict[str, Any]:
    import msgspec
    import numpy as np

    class Req(msgspec.Struct, array_like=True):  # the shape vLLM's EngineCoreRequest gives the IDs
        request_id: str
        prompt_token_ids: list[int]

    class ReqBytes(msgspec.Struct, array_like=True):
        request_id: str
        prompt_token_ids: bytes

    class ReqDelta(msgspec.Struct, array_like=True):  # the delta in an untyped field, as the part sends it
        request_id: str
        prompt_token_ids: list[int] | None
        reasoning_parser_kwargs: dict[str, Any] | None

    from frank.plugins.front_end.held_prompt import KEY, choose_reference

    enc = msgspec.msgpack.Encoder()
    dec = msgspec.msgpack.Decoder(Req)
    dec_bytes = msgspec.msgpack.Decoder(ReqBytes)
    dec_delta = msgspec.msgpack.Decoder(ReqDelta)
    rows: dict[str, list[float]] = {
        "msgpack_list": [],
        "bytes_array_tolist": [],
        "bytes_numpy_tolist": [],
        "encode_list": [],
        "held_api_server": [],
        "held_engine_core": [],
    }

    def send_delta(prompt: list[int], prev: list[int]) -> bytes:
        _, ref, common = choose_reference(prompt, [(1, prev, None)])
        return enc.encode(ReqDelta("r", None, {KEY: [1, 1, len(ref), common, 2, prompt[common:]]}))

    def rebuild(wire: bytes, prev: list[int]) -> list[int]:
        delta = dec_delta.decode(wire).reasoning_parser_kwargs[KEY]
        ids = prev[: delta[3]]
        ids += delta[5]
        return ids

    for k, prompt in enumerate(prompts):
        if k:
            prev = prompts[k - 1]
            wire_d = send_delta(prompt, prev)
            assert rebuild(wire_d, prev) == prompt
            rows["held_api_server"].append(_median_ms(lambda p=prompt, q=prev: send_delta(p, q), repeat))
            rows["held_engine_core"].append(_median_ms(lambda w=wire_d, q=prev: rebuild(w, q), repeat))
        wire = enc.encode(Req("r", prompt))
        wire_b = enc.encode(ReqBytes("r", array.array("i", prompt).tobytes()))
        assert dec.decode(wire).prompt_token_ids == prompt
        assert array.array("i", dec_bytes.decode(wire_b).prompt_token_ids).tolist() == prompt
        assert np.frombuffer(dec_bytes.decode(wire_b).prompt_token_ids, dtype=np.int32).tolist() == prompt
        rows["encode_list"].append(_median_ms(lambda p=prompt: enc.encode(Req("r", p)), repeat))
        rows["msgpack_list"].append(_median_ms(lambda w=wire: dec.decode(w), repeat))
        rows["bytes_array_tolist"].append(
            _median_ms(lambda w=wire_b: array.array("i", dec_bytes.decode(w).prompt_token_ids).tolist(), repeat)
        )
        rows["bytes_numpy_tolist"].append(
            _median_ms(
                lambda w=wire_b: np.frombuffer(dec_bytes.decode(w).prompt_token_ids, dtype=np.int32).tolist(),
                repeat,
            )
        )
    return {k: statistics.mean(v) for k, v in rows.items()}


def _hashes(prompts: list[list[int]], repeat: int) -> dict[str, Any]:
    from vllm.utils.hashing import sha256
    from vllm.v1.core import kv_cache_utils
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash

    from frank.plugins.front_end import block_hash_memo

    init_none_hash(sha256)
    hasher = get_request_block_hasher(BLOCK, sha256)

    class _Req:  # what the hasher reads from a vLLM Request
        def __init__(self, ids: list[int], salt: str) -> None:
            self.block_hashes: list[Any] = []
            self.all_token_ids = ids
            self.num_tokens = len(ids)
            self.mm_features: list[Any] = []
            self.lora_request = None
            self.cache_salt = salt
            self.prompt_embeds = None
            self.prompt_is_token_ids = None

    def run_all(salt: str) -> tuple[list[float], list[list[Any]]]:
        times, out = [], []
        for prompt in prompts:
            t0 = time.perf_counter()
            out.append(hasher(_Req(prompt, salt)))
            times.append((time.perf_counter() - t0) * 1000)
        return times, out

    plain_runs, plain_hashes = [], None
    for k in range(repeat):
        times, plain_hashes = run_all(f"salt-{k}")
        plain_runs.append(times)
    original = kv_cache_utils.hash_block_tokens
    block_hash_memo.install()
    block_hash_memo.set_enabled(True)
    try:
        memo_runs, first_turn, rest, identical = [], [], [], True
        for k in range(repeat):
            block_hash_memo.clear()
            times, hashes = run_all(f"salt-{k}")
            memo_runs.append(times)
            first_turn.append(times[0])
            rest.extend(times[1:])
            if k == repeat - 1:
                _, again = run_all(f"salt-{k}")  # check against the same salt's plain hashes
        _, check = run_all(f"salt-{repeat - 1}")
        identical = check == plain_hashes and again == plain_hashes
    finally:
        block_hash_memo.set_enabled(False)
        kv_cache_utils.hash_block_tokens = original
    plain = [statistics.median(col) for col in zip(*plain_runs)]
    memo = [statistics.median(col) for col in zip(*memo_runs)]
    return {
        "blocks_per_request": [len(p) // BLOCK for p in prompts],
        "vllm_ms_per_request": statistics.mean(plain),
        "memo_ms_per_request": statistics.mean(memo),
        "memo_first_turn_ms": statistics.median(first_turn),
        "memo_later_turns_ms": statistics.median(rest),
        "vllm_first_turn_ms": plain[0],
        "vllm_later_turns_ms": statistics.median(plain[1:]),
        "hashes_identical": identical,
        "memo_stats": block_hash_memo.snapshot(),
    }


def _detok(prompts: list[list[int]], repeat: int, model_dir: str) -> dict[str, Any]:
    from vllm.sampling_params import SamplingParams
    from vllm.tokenizers import get_tokenizer
    from vllm.v1.engine import EngineCoreRequest
    from vllm.v1.engine.detokenizer import IncrementalDetokenizer

    from frank.plugins.front_end import detok_tail

    tok = get_tokenizer(model_dir)
    outs = tok.encode(" the answer is 42 🙂", add_special_tokens=False)[:4]

    def first_tokens(prompt: list[int]) -> str:
        request = EngineCoreRequest(
            request_id="r",
            prompt_token_ids=prompt,
            mm_features=None,
            sampling_params=SamplingParams(max_tokens=8),
            pooling_params=None,
            arrival_time=0.0,
            lora_request=None,
            cache_salt=None,
            data_parallel_rank=None,
        )
        detok = IncrementalDetokenizer.from_new_request(tok, request)
        for t in outs:
            detok.update([t], stop_terminated=False)
        return detok.output_text

    detok_tail.install()
    rows: dict[str, list[float]] = {"off": [], "on": []}
    texts: dict[str, list[str]] = {"off": [], "on": []}
    for prompt in prompts:
        for arm in ("off", "on"):
            detok_tail.switch.set_enabled(arm == "on")
            texts[arm].append(first_tokens(prompt))
            rows[arm].append(_median_ms(lambda p=prompt: first_tokens(p), repeat))
    detok_tail.switch.set_enabled(False)
    return {
        "vllm_ms_per_request": statistics.mean(rows["off"]),
        "tail_ms_per_request": statistics.mean(rows["on"]),
        "texts_identical": texts["on"] == texts["off"],
        "counts": detok_tail.switch.snapshot()["counts"],
    }


def _choose_reference_before(ids: list[int], held: list[Any]) -> tuple[int, list[int], int] | None:
    """held-prompt's choice as it was before the region-by-region comparison (commit 9a3f43c), kept here
    for the before/after figure: every candidate compared in full, a near-prefix twice."""
    from frank.plugins.front_end.held_prompt import MIN_COMMON, common_prefix

    n = len(ids)
    screened = sorted(
        (
            (number, ref)
            for number, ref, _ in held
            if len(ref) >= MIN_COMMON and ref[0] == ids[0] and ref[MIN_COMMON - 1] == ids[MIN_COMMON - 1]
        ),
        key=lambda item: len(item[1]),
        reverse=True,
    )
    best: tuple[int, list[int], int] | None = None
    for number, ref in screened:
        m = len(ref)
        if m <= n and ref[-1] == ids[m - 1] and ref[m // 2] == ids[m // 2] and common_prefix(ids, ref) == m:
            best = (number, ref, m)
            break
    floor = best[2] if best else MIN_COMMON
    for number, ref in screened:
        if len(ref) <= floor or (best and ref[floor - 1] != ids[floor - 1]):
            continue
        common = common_prefix(ids, ref)
        if common >= floor and (best is None or common > best[2]):
            best = (number, ref, common)
    return best


def _w01_handoff(workload: str, model_dir: str, draw: str, repeat: int) -> dict[str, Any]:
    """The hand-off of W01's real prompts (one draw, in its order), each rendered by vLLM's own renderer
    through the region cache (so each ID list is the cache's join, with its record), then handed over as
    the API server and the engine core do: vLLM's MsgpackEncoder / typed MsgpackDecoder(EngineCoreRequest)
    of the whole prompt, against held-prompt's choice of the held turn (before: compared in full; now:
    region by region) and delta, and the engine core's rebuild. The held prompts are the API server's
    (its newest HOLD, the six conversations interleaved). Every choice is checked against the full
    comparison, every rebuilt prompt against the one sent."""
    import asyncio
    import importlib.util
    import itertools
    import logging

    from vllm import SamplingParams
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.v1.engine import EngineCoreRequest
    from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

    from frank.plugins.front_end import held_prompt as hp
    from frank.plugins.region_cache import composition, plugin, runtime

    logging.disable(logging.WARNING)
    spec = importlib.util.spec_from_file_location("bench_rc", REPO / "benchmarks" / "bench_region_cache_frontend.py")
    bench_rc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_rc)  # its renderer set-up, exactly as its front-end benchmark uses it
    plugin.install()
    online, _ = bench_rc._build(model_dir, "hf")
    runtime.set_enabled(True)
    runtime.clear()
    requests = bench_rc._load_requests(Path(workload), [draw])
    encoder, decoder = MsgpackEncoder(), MsgpackDecoder(EngineCoreRequest)
    hp.switch.set_enabled(True)
    for held in (hp._held, hp._core_held, hp._core_hashes):
        held.clear()
    rows: dict[str, list[float]] = {
        k: []
        for k in (
            "vllm_encode",
            "vllm_decode",
            "choose_before",
            "choose_in_full",
            "choose_by_regions",
            "plan_encode",
            "decode_rebuild",
            "rebuild_slice_extend",
            "rebuild_concat",
            "request_copy",
        )
    }
    checked = {"warm": 0, "same_choice": 0, "rebuilt_equal": 0, "records": 0, "tokens": [], "regions": []}

    async def render(body: dict[str, Any]) -> list[int]:
        result = await online.render_chat(ChatCompletionRequest.model_validate(body))
        return result[1][0]["prompt_token_ids"]

    def time_api_server(req: Any, ids: list[int], held: list[Any], joined: Any) -> None:
        rows["vllm_encode"].append(_median_ms(lambda: encoder.encode(req), repeat))
        rows["choose_before"].append(_median_ms(lambda: _choose_reference_before(ids, held), repeat))
        in_full = [(n, ref, None) for n, ref, _ in held]
        rows["choose_in_full"].append(_median_ms(lambda: hp.choose_reference(ids, in_full), repeat))
        rows["choose_by_regions"].append(_median_ms(lambda: hp.choose_reference(ids, held, joined), repeat))
        first = next(hp._numbers)  # the timing's plans take numbers: given back, so the window is the server's
        rows["plan_encode"].append(_median_ms(lambda: encoder.encode(hp.plan(0, req)[1]), repeat))
        hp._numbers = itertools.count(first)

    def time_engine_core(req: Any, ids: list[int], frames: Any, ref: list[int], common: int) -> None:
        whole = encoder.encode(req)
        rows["vllm_decode"].append(_median_ms(lambda: decoder.decode(whole), repeat))
        suffix = ids[common:]
        rows["rebuild_slice_extend"].append(_median_ms(lambda: ref[:common].__iadd__(suffix), repeat))
        rows["rebuild_concat"].append(_median_ms(lambda: ref[:common] + suffix, repeat))
        rows["request_copy"].append(_median_ms(lambda: ids.copy(), repeat))
        rows["decode_rebuild"].append(_median_ms(lambda: hp.rebuild(0, decoder.decode(frames)), repeat))

    loop = asyncio.new_event_loop()
    sent: dict[int, list[int]] = {}
    for name, record in requests:
        ids = loop.run_until_complete(render(record["body"]))
        checked["tokens"].append(len(ids))
        joined = composition.composition_of(ids)
        checked["records"] += joined is not None
        checked["regions"].append(len(joined.regions) if joined is not None else 0)
        req = EngineCoreRequest(
            request_id=name,
            prompt_token_ids=ids,
            mm_features=None,
            sampling_params=SamplingParams(max_tokens=1),
            pooling_params=None,
            arrival_time=0.0,
            lora_request=None,
            cache_salt=None,
            data_parallel_rank=None,
        )
        held = [(n, ref, j) for n, (ref, j) in hp._held.newest_first(0)]
        found = hp.choose_reference(ids, held, joined)
        warm = record["turn"] > 1  # a held turn of the same conversation to start from
        if warm:
            checked["warm"] += 1
            in_full = hp.choose_reference(ids, [(n, ref, None) for n, ref, _ in held])
            checked["same_choice"] += found is not None and found == in_full == _choose_reference_before(ids, held)
            time_api_server(req, ids, held, joined)
        number, wire, hold = hp.plan(0, req)
        frames = encoder.encode(wire)
        if warm and found is not None:  # the engine core holds the list it rebuilt (the API server: a view)
            time_engine_core(req, ids, frames, sent[found[0]], found[2])
        got = decoder.decode(frames)
        if got.reasoning_parser_kwargs and hp.KEY in got.reasoning_parser_kwargs:
            hp.rebuild(0, got)
        checked["rebuilt_equal"] += got.prompt_token_ids == ids
        if hold:
            hp.hold_sent(0, number, ids)
            sent[number] = ids
    loop.close()
    tokens = checked.pop("tokens")
    regions = checked.pop("regions")
    checked["regions_per_prompt"] = [min(regions), max(regions)]
    return {
        "draw": draw,
        "requests": len(requests),
        "prompt_tokens": [min(tokens), max(tokens)],
        "ms_per_warm_request": {k: statistics.mean(v) for k, v in rows.items()},
        "checked": checked,
        "ok": checked["same_choice"] == checked["warm"] > 0 and checked["rebuilt_equal"] == len(requests),
    }


def _inner(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "synthetic" in args.sections:
        prompts = _conversation(args.turns, args.seed)
        out["prompt_tokens"] = [len(p) for p in prompts]
        out["detokenizer_ms"] = _detok(prompts, args.repeat, args.model_dir)
        out["handoff_ms"] = _handoff(prompts, args.repeat)
        out["block_hashes"] = _hashes(prompts, args.repeat)
    if "w01" in args.sections:
        out["w01_handoff"] = _w01_handoff(args.workload, args.model_dir, args.draw, args.repeat)
    out["load_avg"] = os.getloadavg()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--model-dir", default=None, help="the tiny model (default: the models dir's tiny-frank)")
    parser.add_argument(
        "--sections",
        default="synthetic",
        help="comma-separated: synthetic (the synthetic conversation: detokenizer, hand-off, block hashes), "
        "w01 (the hand-off of W01 full's real prompts through the region cache and held-prompt)",
    )
    parser.add_argument("--draw", default="draw-1", help="the W01 full draw of the w01 section")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.inner:
        import tempfile

        from frank import paths
        from frank.workloads.w01 import make_w01

        model_dir = args.model_dir or str(paths.models_dir() / "tiny-frank")
        engine_python = REPO / ".venv-engine" / "bin" / "python"
        cmd = [str(engine_python), __file__, "--inner", "--turns", str(args.turns), "--repeat", str(args.repeat)]
        cmd += ["--model-dir", model_dir, "--sections", args.sections, "--draw", args.draw]
        cmd += ["--seed", str(args.seed)] + (["--json"] if args.json else [])
        env = frontend_worker_env(REPO)
        with tempfile.TemporaryDirectory(prefix="frank-parts-bench-") as tmp:
            if "w01" in args.sections:
                cmd += ["--workload", str(make_w01(Path(tmp) / "w01", "full", 1))]
            return subprocess.call(cmd, env=env)
    result = _inner(args)
    ok = all(
        [
            result.get("block_hashes", {}).get("hashes_identical", True),
            result.get("detokenizer_ms", {}).get("texts_identical", True),
            result.get("w01_handoff", {}).get("ok", True),
        ]
    )
    if args.json:
        print(json.dumps(result, indent=2))
        return 0 if ok else 1
    print(f"load average {result['load_avg'][0]:.1f} (1 min)")
    if "w01_handoff" in result:
        _print_w01(result["w01_handoff"])
    if "synthetic" in args.sections:
        _print_synthetic(result, args.turns)
    return 0 if ok else 1


def _print_w01(w: dict[str, Any]) -> None:
    m, c = w["ms_per_warm_request"], w["checked"]
    print(
        f"W01 full {w['draw']}: {w['requests']} requests of {w['prompt_tokens'][0]:,}-{w['prompt_tokens'][1]:,} "
        f"tokens, {c['warm']} warm; ms per warm request (mean over them, median of repeats):"
    )
    print(f"  API server: vLLM's encode of the whole prompt                 {m['vllm_encode']:.3f}")
    print(f"  held-prompt's choice of the held turn, before (in full)       {m['choose_before']:.3f}")
    print(f"  held-prompt's choice, compared in full once per candidate     {m['choose_in_full']:.3f}")
    print(f"  held-prompt's choice, region by region                        {m['choose_by_regions']:.3f}")
    print(f"  held-prompt's plan + encode of the delta (as served now)      {m['plan_encode']:.3f}")
    print(f"  engine core: vLLM's decode of the whole prompt                {m['vllm_decode']:.3f}")
    print(f"  engine core: decode of the delta + rebuild (as served now)    {m['decode_rebuild']:.3f}")
    print(f"  rebuild alone: held[:common], then += suffix (as served now)  {m['rebuild_slice_extend']:.3f}")
    print(f"  rebuild alone: held[:common] + suffix (one allocation)        {m['rebuild_concat']:.3f}")
    print(f"  vLLM's Request: its copy of the prompt (_all_token_ids)       {m['request_copy']:.3f}")
    print(
        f"  same choice as in full on all warm requests: {c['same_choice'] == c['warm']} ({c['same_choice']}); "
        f"records found {c['records']}/{w['requests']} ({c['regions_per_prompt'][0]}-{c['regions_per_prompt'][1]} "
        f"regions a prompt); rebuilt equal {c['rebuilt_equal']}/{w['requests']}"
    )


def _print_synthetic(result: dict[str, Any], turns: int) -> None:
    h, b, d = result["handoff_ms"], result["block_hashes"], result["detokenizer_ms"]
    print(f"prompts: {result['prompt_tokens'][0]:,}-{result['prompt_tokens'][-1]:,} tokens, {turns} turns")
    print("detokenizer set-up and first 4 output tokens, ms per request (mean over turns, median of repeats):")
    print(f"  vLLM (DecodeStream primed with the whole prompt)  {d['vllm_ms_per_request']:.2f}")
    print(f"  detok-tail (primed with the tail)                 {d['tail_ms_per_request']:.2f}")
    print(f"  output texts identical: {d['texts_identical']}")
    print("hand-off, ms per request (mean over turns, median of repeats):")
    print(f"  API server msgpack encode of list[int]  {h['encode_list']:.2f}")
    print(f"  engine core msgpack decode of list[int] {h['msgpack_list']:.2f}   (vLLM today)")
    print(f"  packed bytes -> array.tolist            {h['bytes_array_tolist']:.2f}")
    print(f"  packed bytes -> numpy.tolist            {h['bytes_numpy_tolist']:.2f}")
    print(f"  held-prompt delta, API server (compare + encode)   {h['held_api_server']:.2f}   (later turns)")
    print(f"  held-prompt delta, engine core (decode + rebuild)  {h['held_engine_core']:.2f}   (later turns)")
    print("block hashes, ms per request:")
    print(
        f"  vLLM (pickle + SHA-256 per block)  first turn {b['vllm_first_turn_ms']:.2f}, "
        f"later {b['vllm_later_turns_ms']:.2f}"
    )
    print(
        f"  memo                               first turn {b['memo_first_turn_ms']:.2f}, "
        f"later {b['memo_later_turns_ms']:.2f}"
    )
    print(f"  hashes identical: {b['hashes_identical']}")


if __name__ == "__main__":
    sys.exit(main())
