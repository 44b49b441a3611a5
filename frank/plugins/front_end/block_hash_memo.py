"""Prefix-cache block hashes from a memo: a `vllm.general_plugins` entry point (engine core).

What vLLM does (0.32, v1/core/kv_cache_utils.py): when a request arrives, `get_request_block_hasher`
hashes every full block of its prompt with `hash_block_tokens(hash_fn, parent, block_tokens, extra_keys)`
= `hash_fn((parent or NONE_HASH, tuple(block_tokens), extra_keys))`; with the default
`--prefix-caching-hash-algo sha256` that is pickle + SHA-256 per 128-token block, about 3.5 ms for a
170K-token prompt. An agent's next turn repeats its last prompt and hashes all of it again.

The memo maps that exact input triple, per hash function, to the hash vLLM computed for it; a miss calls
vLLM's own function and stores its result. So every hash handed out is one vLLM's function returned for an
equal input, and the hash function is vLLM's own (never a weaker one). Equal here means Python equality of
the triple, which for vLLM's inputs (bytes parent hashes, tuples of int token IDs from msgspec's typed
decode and the sampler's `tolist`, extra keys of str/bytes/int tuples or None) is equality of the pickled
bytes; an input that cannot be a key (unhashable extra keys) is hashed by vLLM without the memo. The memo
is bounded (FRANK_BLOCK_HASH_MEMO_MAX_BLOCKS, default 32768 blocks, first in first out: about 1.1 KB a
block; a W01 draw's six conversations hold about 8,500).

`FRANK_BLOCK_HASH_MEMO_VERIFY` (off | all | a fraction) recomputes sampled hits with vLLM's function; a
difference is counted, the recomputed hash is returned and the memo is cleared and turned off for good.
Set at start (`FRANK_BLOCK_HASH_MEMO=on|off`), so the off arm is vLLM untouched. Its counters are read
through an engine-core utility method (GET /frank/parts/block-hash-memo on the API server), and logged to
the engine log every 200,000 hits and at every mismatch.
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from frank.plugins import compat
from frank.plugins.front_end.catalog import PARTS
from frank.plugins.front_end.switch import PartSwitch, SwitchSnapshot

logger = logging.getLogger(__name__)
PART = PARTS["block-hash-memo"]
MAX_BLOCKS_ENV = "FRANK_BLOCK_HASH_MEMO_MAX_BLOCKS"
DEFAULT_MAX_BLOCKS = 32768
LOG_EVERY = 200_000  # lookups between stats lines in the engine log

switch = PartSwitch(PART.name, PART.env, PART.verify_env)
_memo: dict[tuple[Any, ...], Any] = {}
_max_blocks = DEFAULT_MAX_BLOCKS
_hits, _misses, _evictions = itertools.count(), itertools.count(), itertools.count()


STATS_UTILITY = "frank_block_hash_memo_stats"
_K = "vllm.v1.core.kv_cache_utils"
# What the memo replaces and the hasher that looks it up per block (compat.py).
PATCHES = compat.Patches(
    PART.name,
    (
        compat.Target(
            f"{_K}:hash_block_tokens",
            {"0.32.0": ("(hash_function, parent_block_hash, curr_block_token_ids, extra_keys=)", "740bda11b737487d")},
        ),
        compat.Target(
            f"{_K}:get_request_block_hasher", {"0.32.0": ("(hash_block_size, caching_hash_fn)", "65b4d50eef5823e1")}
        ),
    ),
)


def register() -> None:
    """Entry point: the stats utility in the engine core; the hook only where the part is switched on."""
    core = sys.modules.get("vllm.v1.engine.core")  # loaded in the engine core process, the one that hashes
    if core is not None and not hasattr(core.EngineCore, STATS_UTILITY):
        # a utility method: the API server reaches it with engine_core.call_utility_async (control.py)
        setattr(core.EngineCore, STATS_UTILITY, lambda self: snapshot())
    if not switch.enabled:
        return
    try:
        install()
    except Exception:
        logger.exception("frank block-hash-memo: not installed")


def _read_max_blocks() -> int:
    raw = os.environ.get(MAX_BLOCKS_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_BLOCKS
    try:
        value = int(raw)
        if value < 1:
            raise ValueError
        return value
    except ValueError:
        logger.error("%s=%r: expected a positive integer; using %d", MAX_BLOCKS_ENV, raw, DEFAULT_MAX_BLOCKS)
        return DEFAULT_MAX_BLOCKS


def install() -> None:
    global _max_blocks
    from vllm.v1.core import kv_cache_utils

    original = kv_cache_utils.hash_block_tokens
    if getattr(original, "_frank_block_hash_memo", False):
        return
    verdict = compat.admit(PATCHES)
    if not verdict.compatible:  # never patched blindly: off, its stats (the utility call) say why
        switch.refuse(verdict.reason)
        return
    _max_blocks = _read_max_blocks()

    def hash_block_tokens(
        hash_function: Callable[[Any], bytes],
        parent_block_hash: Any,
        curr_block_token_ids: Sequence[int],
        extra_keys: tuple[Any, ...] | None = None,
    ) -> Any:
        if not switch.enabled:
            return original(hash_function, parent_block_hash, curr_block_token_ids, extra_keys)
        # keyed on the parent vLLM hashes with: NONE_HASH for the first block, as the original substitutes
        parent = parent_block_hash if parent_block_hash else kv_cache_utils.NONE_HASH
        return memo_hash(original, hash_function, parent, curr_block_token_ids, extra_keys)

    # marks on the patch itself (a function declares no attributes): frank.plugins.compat reads them
    hash_block_tokens._frank_block_hash_memo = True  # type: ignore[attr-defined]
    hash_block_tokens.__wrapped__ = original  # type: ignore[attr-defined]
    # request_block_hasher looks the function up in the module at every block: replacing it here is enough.
    kv_cache_utils.hash_block_tokens = hash_block_tokens
    logger.info("frank block-hash-memo: hooked hash_block_tokens (max %d blocks)", _max_blocks)


def memo_hash(
    original: Callable[..., Any],
    hash_function: Callable[[Any], bytes],
    parent_block_hash: Any,
    curr_block_token_ids: Sequence[int],
    extra_keys: tuple[Any, ...] | None,
) -> Any:
    """vLLM's hash of the block, from the memo when this exact input was hashed before.

    Lean on purpose (it runs per block): a plain dict under the GIL (the engine core hashes from its input
    thread and its main loop; each dict operation is atomic, and a lost race only costs a recompute),
    first-in first-out eviction, and counters that are `itertools.count` (atomic `next`)."""
    key = (hash_function, parent_block_hash, tuple(curr_block_token_ids), extra_keys)
    try:
        found = _memo.get(key)
    except TypeError:  # unhashable extra keys: vLLM hashes it, no memo
        switch.count("unhashable")
        return original(hash_function, parent_block_hash, curr_block_token_ids, extra_keys)
    if found is not None:
        if next(_hits) % LOG_EVERY == 0:
            logger.info("frank block-hash-memo: %s", snapshot())
        if switch.verify and switch.should_verify():
            return _verified(found, original, hash_function, parent_block_hash, curr_block_token_ids, extra_keys)
        return found
    value = original(hash_function, parent_block_hash, curr_block_token_ids, extra_keys)
    next(_misses)
    _memo[key] = value
    while len(_memo) > _max_blocks:
        try:
            del _memo[next(iter(_memo))]
            next(_evictions)
        except (KeyError, RuntimeError, StopIteration):  # another thread changed it: try again next time
            break
    return value


def _verified(found: Any, original: Callable[..., Any], *args: Any) -> Any:
    fresh = original(*args)
    switch.count("verified")
    if fresh != found:
        switch.count("mismatches")
        logger.error("frank block-hash-memo: a memo hit differed from vLLM's hash; memo cleared and off")
        clear()
        switch.set_enabled(False)
        logger.error("frank block-hash-memo: %s", snapshot())
    return fresh


def set_enabled(value: bool) -> None:
    switch.set_enabled(value)


def clear() -> None:
    _memo.clear()


def _count_of(counter: itertools.count[int]) -> int:
    return int(repr(counter)[len("count(") : -1])  # its next value: how often next() was called


def snapshot() -> SwitchSnapshot:
    out = switch.snapshot()
    out["counts"].update(hits=_count_of(_hits), misses=_count_of(_misses), evictions=_count_of(_evictions))
    out["blocks_held"] = len(_memo)
    out["max_blocks"] = _max_blocks
    return out
