r"""Region cache core: split a rendered prompt at the tokenizer's special tokens and reuse token IDs.

Why the join equals a fresh encode. A HF fast tokenizer (the Rust `tokenizers` library) first finds the
added tokens whose `normalized` flag is off in the raw text (Aho-Corasick, leftmost-longest), cuts the
text there, and then normalizes, pre-tokenizes and models each piece between them on its own. So the IDs
of a prompt are the IDs of its pieces joined with the added tokens' IDs, provided that
  1. we cut at a subset of the places where the library cuts: we scan with the same leftmost-longest rule
     over every non-normalized added token, and cut only at "atomic" ones (no lstrip/rstrip/single_word,
     no whitespace at either end, so no neighbour's stripping or word-boundary test can reach across);
  2. nothing in the pipeline depends on where a piece sits in the whole text. Known offender: Metaspace
     with prepend_scheme "first" (it prepends only at offset 0). A tokenizer with one is refused, as is
     one with `encode_special_tokens` on or any single-word added token;
  3. the tokenizer's Python wrapper adds nothing of its own. Not provable from the outside, so every
     encoder starts with a probe: a battery of prompts built from the tokenizer's own special tokens
     (empty regions, adjacent tokens, unicode, whitespace around tokens, prefixes of tokens) is encoded
     both ways; any difference refuses the tokenizer for good.
Chunks. A big region missing from the cache (a new conversation whose context differs from an earlier
one only by a header line, say) is further cut into content-defined chunks, so that its unchanged parts
are found. This is done only where it is provable: no normalizer, the pre-tokenizer is exactly ByteLevel
with GPT-2's regex and add_prefix_space off, a BPE model without dropout, and no added token holding a
newline. The cut is right after a "\n" that has a printable non-space ASCII character on both sides:
GPT-2's regex then makes that "\n" a pre-token of its own in the whole text (`\s+(?!\S)` cannot take it,
`\s+` takes exactly it) and at the end of the left piece (`\s+(?!\S)` takes exactly it), and nothing
before it can reach across (the only patterns holding "\n" are the whitespace ones, and the character
before it is not whitespace). BPE merges never cross pre-tokens, so the pieces encode to the same IDs.
The probe checks this too (cutting at every such place) and turns chunking off if it ever differs.
A refused tokenizer falls back to a plain encode on every prompt. Verify mode re-checks live prompts
against a fresh encode (all, or a sampled fraction); a mismatch returns the fresh IDs, is counted, and
refuses the tokenizer from then on.

Pure: stdlib only. The tokenizer comes in through a small adapter (HF tokenizer or `tokenizers.Tokenizer`).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import sys
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, cast

from frank.plugins.region_cache import composition

# Rough CPython cost of one cached entry beyond its token pointers (list header, key, OrderedDict slot).
_ENTRY_OVERHEAD_BYTES = 200
_POINTER_BYTES = 8

DEFAULT_MAX_TOKENS = 8_000_000
DEFAULT_MAX_BYTES = 256 * 1024 * 1024


# -- the tokenizer seen through an adapter ------------------------------------------------------------


class TokenizerAdapter(Protocol):
    def config_json(self) -> str: ...
    def encode(self, text: str, add_special_tokens: bool) -> list[int]: ...
    def encode_regions(self, texts: list[str]) -> list[list[int]]: ...


class HFAdapter:
    """A transformers fast tokenizer (vLLM's cached and pooled wrappers included).

    `encode` is the same __call__ vLLM uses, so the probe and verify compare against exactly vLLM's own
    path. `encode_regions` (the cache's misses) runs a private copy of the Rust tokenizer, rebuilt from the
    same serialized pipeline, through `encode_batch_fast`: no offsets, no Python wrapper, about 1.5x
    faster than the __call__ on a full-scale region. The copy is never mutated (no truncation or padding is
    ever set on it), so concurrent encodes from the renderer's threads only share immutable state."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._config = tokenizer.backend_tokenizer.to_str()
        self._batch = _fast_batch_encoder(self._config)

    def config_json(self) -> str:
        return self._config

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=add_special_tokens, truncation=False)["input_ids"])

    def encode_regions(self, texts: list[str]) -> list[list[int]]:
        return self._batch(texts)


# Misses bigger than this are split over threads: the Rust call releases the GIL, and vLLM runs with
# TOKENIZERS_PARALLELISM=false (fork safety), so without threads a new conversation's first encode
# (~170K tokens, the bulk of its front end) would use one core while the engine core waits for it.
PARALLEL_MIN_CHARS = 200_000
ENCODE_THREADS = max(1, min(4, os.cpu_count() or 1))


def _fast_batch_encoder(config_json: str) -> Callable[[list[str]], list[list[int]]]:
    """Each text is its own sequence: no special tokens, padding, truncation or carry-over."""
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(config_json)
    backend.no_truncation()
    backend.no_padding()
    batch = getattr(backend, "encode_batch_fast", backend.encode_batch)  # fast: tokenizers >= 0.20

    def encode_one_thread(texts: list[str]) -> list[list[int]]:
        return [e.ids for e in batch(texts, add_special_tokens=False)]

    def encode(texts: list[str]) -> list[list[int]]:
        groups = _split_by_chars(texts, ENCODE_THREADS)
        if len(groups) < 2 or sum(map(len, texts)) < PARALLEL_MIN_CHARS:
            return encode_one_thread(texts)
        out: list[list[int]] = []
        for ids in _encode_pool().map(encode_one_thread, groups):  # map keeps the groups' order
            out.extend(ids)
        return out

    return encode


def _split_by_chars(texts: list[str], parts: int) -> list[list[str]]:
    """Contiguous groups of about equal total length (order kept, so results join back in place)."""
    if parts < 2 or len(texts) < 2:
        return [texts]
    target = sum(map(len, texts)) / parts or 1
    groups: list[list[str]] = [[] for _ in range(parts)]
    done = 0
    for text in texts:  # by where the text's middle falls: monotonic, so order is kept
        groups[min(parts - 1, int((done + len(text) / 2) / target))].append(text)
        done += len(text)
    return [g for g in groups if g]


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _encode_pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(ENCODE_THREADS, thread_name_prefix="frank-region-encode")
        return _POOL


class RustAdapter:
    """A bare `tokenizers.Tokenizer` (unit tests; no transformers needed)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def config_json(self) -> str:
        return self.tokenizer.to_str()

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_regions(self, texts: list[str]) -> list[list[int]]:
        batch = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)
        return [e.ids for e in batch(texts, add_special_tokens=False)]


# -- where to cut -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AddedToken:
    id: int
    content: str
    special: bool
    normalized: bool
    lstrip: bool
    rstrip: bool
    single_word: bool

    @property
    def atomic(self) -> bool:
        c = self.content
        return (
            bool(c)
            and not self.normalized
            and not self.lstrip
            and not self.rstrip
            and not self.single_word
            and not c[0].isspace()
            and not c[-1].isspace()
        )


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def position_dependence(config: dict[str, Any]) -> str:
    """Why pieces of this tokenizer could encode differently alone than in place ("" if no known reason)."""
    for part in ("normalizer", "pre_tokenizer"):
        for node in _walk(config.get(part)):
            if node.get("type") == "Metaspace" and node.get("prepend_scheme") == "first":
                return f"{part} Metaspace prepend_scheme=first prepends only at the start of the text"
    for tok in config.get("added_tokens") or []:
        if tok.get("single_word"):
            return f"added token {tok.get('content')!r} is single_word (its match depends on neighbours)"
    return ""


# Chunk cut: after a newline with printable non-space ASCII on both sides (see the module docstring).
# The regex finds a newline followed by one (a literal first, so the scan is a fast search: a lookbehind
# first made it 10x slower on a 600 KB region); the character before is checked in Python.
_NEWLINE_BEFORE_PRINTABLE = re.compile(r"\n(?=[!-~])")
_PRINTABLE = frozenset(map(chr, range(0x21, 0x7F)))
CHUNK_MIN_CHARS = 4096  # no chunk shorter than this (except a region's last)
CHUNK_MASK = 63  # about one eligible line start in 64 ends a chunk: content-defined, resyncs
CHUNK_KEY_CHARS = 32  # the cut decision looks at the start of the next line only


def chunking_refusal(config: dict[str, Any]) -> str:
    """ "" when the chunk cut is proven for this tokenizer's pipeline, else why not."""
    pre = config.get("pre_tokenizer") or {}
    model = config.get("model") or {}
    if config.get("normalizer") is not None:
        return "the tokenizer has a normalizer"
    if not (pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and not pre.get("add_prefix_space")):
        return "the pre-tokenizer is not ByteLevel(use_regex=True, add_prefix_space=False)"
    if model.get("type") != "BPE" or model.get("dropout") not in (None, 0, 0.0):
        return "the model is not a BPE without dropout"
    if any("\n" in (t.get("content") or "") for t in config.get("added_tokens") or []):
        return "an added token holds a newline"
    return ""


def chunk_region(region: str, min_chars: int = CHUNK_MIN_CHARS, mask: int = CHUNK_MASK) -> list[str]:
    """Content-defined chunks of a region, cut only at proven-safe newlines."""
    if len(region) < 2 * min_chars:
        return [region]
    pieces: list[str] = []
    last = 0
    end = len(region) - min_chars
    for match in _NEWLINE_BEFORE_PRINTABLE.finditer(region, max(1, min_chars)):
        cut = match.end()
        if cut > end:
            break
        if (
            region[cut - 2] in _PRINTABLE
            and cut - last >= min_chars
            # crc32, not hash(): str hashes are salted per process, and the cuts must be the same in
            # every process (and every test run) for a changed header to reuse the same chunks.
            and zlib.crc32(region[cut : cut + CHUNK_KEY_CHARS].encode("utf-8", "surrogatepass")) & mask == 0
        ):
            pieces.append(region[last:cut])
            last = cut
    pieces.append(region[last:])
    return pieces


class Splitter:
    """Cuts text at atomic added tokens, scanning like the tokenizer does (leftmost-longest over every
    non-normalized added token; non-atomic matches stay inside their region).

    The scan jumps with str.find from one occurrence of a token's first character to the next (control
    tokens start with one of a few rare characters), which is about 100x faster than a regex alternation
    over a 600K-character prompt; with many distinct first characters it uses the regex instead."""

    MAX_FIRST_CHARS = 8

    def __init__(self, added: Sequence[AddedToken]) -> None:
        raw = [t for t in added if not t.normalized and t.content]
        self.atomic = {t.content: t.id for t in raw if t.atomic}
        longest_first = sorted({t.content for t in raw}, key=len, reverse=True)
        self._by_first: dict[str, list[str]] = {}
        for content in longest_first:  # each list stays longest first
            self._by_first.setdefault(content[0], []).append(content)
        self._pattern = re.compile("|".join(map(re.escape, longest_first))) if longest_first else None

    def matches(self, text: str) -> list[tuple[int, str]]:
        """(start, token) of every added-token match, leftmost-longest, left to right."""
        if self._pattern is None:
            return []
        if len(self._by_first) > self.MAX_FIRST_CHARS:
            return [(m.start(), m.group()) for m in self._pattern.finditer(text)]
        find, starts_with = text.find, text.startswith
        nxt = {c: find(c) for c in self._by_first}
        nxt = {c: i for c, i in nxt.items() if i >= 0}
        out: list[tuple[int, str]] = []
        while nxt:
            c = min(nxt, key=nxt.__getitem__)
            i = nxt[c]
            for token in self._by_first[c]:
                if starts_with(token, i):
                    out.append((i, token))
                    end = i + len(token)
                    # every first-char search restarts at or after the match's end
                    nxt = {d: (j if j >= end else find(d, end)) for d, j in nxt.items()}
                    nxt = {d: j for d, j in nxt.items() if j >= 0}
                    break
            else:
                j = find(c, i + 1)
                if j < 0:
                    del nxt[c]
                else:
                    nxt[c] = j
        return out

    def split(self, text: str) -> tuple[list[str], list[int]]:
        """(regions, token_ids): len(regions) == len(token_ids) + 1; regions may be empty strings."""
        regions: list[str] = []
        ids: list[int] = []
        start = 0
        atomic = self.atomic
        for pos, token in self.matches(text):
            token_id = atomic.get(token)
            if token_id is None:
                continue
            regions.append(text[start:pos])
            ids.append(token_id)
            start = pos + len(token)
        regions.append(text[start:])
        return regions, ids


def added_tokens_from_config(config: dict[str, Any]) -> list[AddedToken]:
    return [
        AddedToken(
            id=int(t["id"]),
            content=t["content"],
            special=bool(t.get("special")),
            normalized=bool(t.get("normalized")),
            lstrip=bool(t.get("lstrip")),
            rstrip=bool(t.get("rstrip")),
            single_word=bool(t.get("single_word")),
        )
        for t in config.get("added_tokens") or []
    ]


# -- the cache --------------------------------------------------------------------------------------


class RegionCacheStats(TypedDict, total=False):
    """The region cache's counters and bounds (`RegionCache.stats`), with the switch, the compat verdict and the
    tokenizers `runtime.snapshot` adds: the one shape of GET /frank/region-cache."""

    requests: float
    hits: float
    misses: float
    hit_tokens: float
    miss_tokens: float
    miss_seconds: float
    seconds_saved: float
    lookup_seconds: float
    verified: float
    mismatches: float
    errors: float
    evictions: float
    checks_skipped: float
    fallbacks: int
    fallback_reasons: dict[str, int]
    entries: int
    tokens_held: int
    bytes_held: int
    max_tokens: int
    max_bytes: int
    verify: float
    enabled: bool
    compat: dict[str, Any]  # frank.plugins.compat.Verdict.to_json
    refused: str
    tokenizers: list[dict[str, str | None]]


@dataclass(frozen=True)
class CacheLimits:
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_bytes: int = DEFAULT_MAX_BYTES
    verify: float = 0.0  # fraction of prompts re-checked against a fresh encode (1.0 = every one)

    @classmethod
    def from_env(cls, given: Mapping[str, str] | None = None) -> CacheLimits:
        env = os.environ if given is None else given
        return cls(
            max_tokens=_env_int(env, "FRANK_REGION_CACHE_MAX_TOKENS", DEFAULT_MAX_TOKENS),
            max_bytes=_env_int(env, "FRANK_REGION_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES),
            verify=parse_verify(env.get("FRANK_REGION_CACHE_VERIFY", "")),
        )


def _env_int(env: Any, name: str, default: int) -> int:
    raw = str(env.get(name, "")).strip().replace("_", "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected a whole number") from None
    if value < 0:
        raise ValueError(f"{name}={raw!r}: must not be negative")
    return value


def parse_verify(raw: str) -> float:
    """FRANK_REGION_CACHE_VERIFY: off/0 (default), on/all/1 (every prompt), or a fraction like 0.05."""
    text = raw.strip().lower()
    if text in ("", "off", "no", "false", "0"):
        return 0.0
    if text in ("on", "all", "yes", "true", "1"):
        return 1.0
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"FRANK_REGION_CACHE_VERIFY={raw!r}: expected off, all or a fraction in (0, 1]") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"FRANK_REGION_CACHE_VERIFY={raw!r}: a fraction must be within [0, 1]")
    return value


def entry_bytes(n_tokens: int) -> int:
    return n_tokens * _POINTER_BYTES + _ENTRY_OVERHEAD_BYTES


def key_bytes(key: Hashable) -> int:
    """Memory a key holds: its parts' sizes (a region's text, 1-4 bytes a character)."""
    parts = key if isinstance(key, tuple) else (key,)
    return sum(sys.getsizeof(part) for part in parts)


class RegionCache:
    """Bounded LRU: region key (the tokenizer's salt and the region's text) -> token ID list.

    Bounded by total tokens and by an estimate of bytes held: the token IDs (lists of shared int objects,
    so about 8 bytes a token) plus the key's text. Thread-safe; also keeps the counters that the control
    serves.
    """

    def __init__(self, limits: CacheLimits | None = None) -> None:
        self.limits = limits or CacheLimits()
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, list[int]] = OrderedDict()
        self._tokens = 0
        self._bytes = 0
        self._counters: dict[str, float] = {}
        self._fallbacks: dict[str, int] = {}
        self.clear_counters()

    @classmethod
    def from_env(cls) -> RegionCache:
        return cls(CacheLimits.from_env())

    # entries
    def get(self, key: Hashable) -> list[int] | None:
        with self._lock:
            ids = self._entries.get(key)
            if ids is not None:
                self._entries.move_to_end(key)
            return ids

    def put(self, key: Hashable, ids: list[int]) -> None:
        n = len(ids)
        size = entry_bytes(n) + key_bytes(key)
        if n > self.limits.max_tokens or size > self.limits.max_bytes:
            return  # larger than the whole cache: never stored
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return
            self._entries[key] = ids
            self._tokens += n
            self._bytes += size
            while self._tokens > self.limits.max_tokens or self._bytes > self.limits.max_bytes:
                old_key, old = self._entries.popitem(last=False)
                self._tokens -= len(old)
                self._bytes -= entry_bytes(len(old)) + key_bytes(old_key)
                self._counters["evictions"] += 1

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._tokens = 0
            self._bytes = 0

    # counters
    def clear_counters(self) -> None:
        self._counters = dict.fromkeys(
            (
                "requests",
                "hits",
                "misses",
                "hit_tokens",
                "miss_tokens",
                "miss_seconds",
                "seconds_saved",
                "lookup_seconds",
                "verified",
                "mismatches",
                "errors",
                "evictions",
                "checks_skipped",
            ),
            0,
        )
        self._fallbacks = {}

    def count(self, **deltas: float) -> None:
        with self._lock:
            for name, delta in deltas.items():
                self._counters[name] += delta

    def count_fallback(self, reason: str) -> None:
        with self._lock:
            self._fallbacks[reason] = self._fallbacks.get(reason, 0) + 1

    def record_lookup(
        self, hits: int, hit_tokens: int, misses: int, miss_tokens: int, miss_seconds: float, lookup_seconds: float
    ) -> None:
        with self._lock:
            c = self._counters
            c["requests"] += 1
            c["hits"] += hits
            c["misses"] += misses
            c["hit_tokens"] += hit_tokens
            c["miss_tokens"] += miss_tokens
            c["miss_seconds"] += miss_seconds
            c["lookup_seconds"] += lookup_seconds
            if c["miss_tokens"]:
                # Saved = what the hit tokens would have cost at the measured encode rate of misses.
                c["seconds_saved"] += hit_tokens * c["miss_seconds"] / c["miss_tokens"]

    def stats(self) -> RegionCacheStats:
        with self._lock:
            counters = {k: (round(v, 6) if isinstance(v, float) else int(v)) for k, v in self._counters.items()}
            out = cast(RegionCacheStats, counters)  # the counters clear_counters names
            out["fallbacks"] = sum(self._fallbacks.values())
            out["fallback_reasons"] = dict(self._fallbacks)
            out["entries"] = len(self._entries)
            out["tokens_held"] = self._tokens
            out["bytes_held"] = self._bytes
            out["max_tokens"] = self.limits.max_tokens
            out["max_bytes"] = self.limits.max_bytes
            out["verify"] = self.limits.verify
            return out


# -- the encoder: split, look up, encode the misses in one call, join --------------------------------


class RegionEncoder:
    """Encodes prompts for one tokenizer through a RegionCache. `encode` returns None when this prompt
    must take the plain path (the caller then runs the tokenizer's own encode)."""

    PROBE_TEXTS = (
        "",
        "Hello world",
        " leading and trailing ",
        "a\n\nb\tc",
        "héllo ünïcode 日本語 🙂 👍🏽",
        "x",
        " ",
        "\n",
        "1234567",
        "def f(x):\n    return x  # ok\n",
    )

    def __init__(
        self, adapter: TokenizerAdapter, cache: RegionCache, *, probe: bool = True, rng: random.Random | None = None
    ) -> None:
        self.adapter = adapter
        self.cache = cache
        self._rng = rng or random.Random()
        raw_config = adapter.config_json()
        config = json.loads(raw_config)
        self._salt = hashlib.blake2b(raw_config.encode(), digest_size=16).digest()
        added = added_tokens_from_config(config)
        self.splitter = Splitter(added)
        vocab_size = _vocab_size(config, added)
        self._ints = list(range(vocab_size))  # shared int objects: cached lists hold pointers, not ints
        self.refused = position_dependence(config)
        if not self.refused and config.get("encode_special_tokens"):
            self.refused = "encode_special_tokens is on (special tokens are not cut out)"
        if not self.refused and not self.splitter.atomic:
            self.refused = "the tokenizer has no atomic added tokens to cut at"
        self.affixes: tuple[list[int], list[int]] | None = None
        self.no_chunking = chunking_refusal(config)
        if not self.refused and probe:
            self.refused = self._probe()
            if not self.refused and not self.no_chunking:
                self.no_chunking = self._probe_chunks()
        if not self.refused:
            self.affixes = self._find_affixes()

    # public
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int] | None:
        if self.refused:
            self.cache.count_fallback("tokenizer_refused")
            return None
        affixes = None
        if add_special_tokens:
            if self.affixes is None:
                self.cache.count_fallback("add_special_tokens")
                return None
            affixes = self.affixes
        ids, joined_from = self._encode_cached(text)
        if self.cache.limits.verify and (
            self.cache.limits.verify >= 1.0 or self._rng.random() < self.cache.limits.verify
        ):
            fresh = self.adapter.encode(text, False)
            self.cache.count(verified=1)
            if fresh != ids:
                self.cache.count(mismatches=1)
                self.refused = "a verified prompt differed from a fresh encode"
                return affixes[0] + fresh + affixes[1] if affixes is not None else fresh
        if affixes is not None:
            return affixes[0] + ids + affixes[1]
        composition.record(ids, joined_from)  # what a reader may compare region by region
        return ids

    def key(self, region: str) -> tuple[bytes, str]:
        # The region's text itself, with the tokenizer's salt. Python hashes a str once per object, about
        # 3x faster than UTF-8 + SHA-256 over the same region (0.19 against 0.65 ms for a 628K-character
        # one), and a hit compares the texts, so no two regions can ever share an entry. The text's memory
        # is counted in the cache's byte bound.
        return (self._salt, region)

    # internals
    def _encode_cached(self, text: str) -> tuple[list[int], composition.Composition]:
        t0 = time.perf_counter()
        regions, seps = self.splitter.split(text)
        cache = self.cache
        found: list[list[int] | None] = []
        missed: list[tuple[int, Hashable]] = []
        hits = hit_tokens = 0
        for i, region in enumerate(regions):
            if not region:
                found.append(_EMPTY)
                continue
            key = self.key(region)
            ids = cache.get(key)
            if ids is None:
                missed.append((i, key))
            else:
                hits += 1
                hit_tokens += len(ids)
            found.append(ids)
        misses = miss_tokens = 0
        miss_seconds = 0.0
        if missed:
            # A missed region: its chunks (if provable) are looked up; what is still missing is encoded
            # in one batch call, each piece on its own.
            plans: list[tuple[int, Hashable, list[tuple[Hashable, list[int] | None]]]] = []
            todo: list[str] = []
            for i, key in missed:
                pieces = [regions[i]] if self.no_chunking else chunk_region(regions[i])
                plan: list[tuple[Hashable, list[int] | None]] = []
                for piece in pieces:
                    pkey = key if len(pieces) == 1 else self.key(piece)
                    ids = None if len(pieces) == 1 else cache.get(pkey)
                    if ids is None:
                        todo.append(piece)
                    else:
                        hits += 1
                        hit_tokens += len(ids)
                    plan.append((pkey, ids))
                plans.append((i, key, plan))
            t1 = time.perf_counter()
            fresh = iter(self.adapter.encode_regions(todo))
            miss_seconds = time.perf_counter() - t1
            misses = len(todo)
            table = self._ints
            for i, key, plan in plans:
                joined: list[int] = []
                for pkey, ids in plan:
                    if ids is None:
                        ids = list(map(table.__getitem__, next(fresh)))
                        miss_tokens += len(ids)
                        if len(plan) > 1:
                            cache.put(pkey, ids)
                    joined.extend(ids)
                cache.put(key, joined)
                found[i] = joined
        out: list[int] = []
        extend = out.extend
        append = out.append
        for i, sep in enumerate(seps):
            # every slot of `found` is filled by now (a hit above or the miss just encoded)
            extend(found[i])  # type: ignore[arg-type]
            append(sep)
        extend(found[-1])  # type: ignore[arg-type]  # filled, as above
        total = time.perf_counter() - t0
        cache.record_lookup(
            hits=hits,
            hit_tokens=hit_tokens,
            misses=misses,
            miss_tokens=miss_tokens,
            miss_seconds=miss_seconds,
            lookup_seconds=total - miss_seconds,
        )
        # filled, as above
        return out, composition.Composition(tuple(found), tuple(seps), len(out))  # type: ignore[arg-type]

    def probe_texts(self) -> list[str]:
        """Prompts built from the tokenizer's own cut tokens around the edge cases that could break a join."""
        toks = sorted(self.splitter.atomic, key=lambda c: self.splitter.atomic[c])[:12]
        texts = list(self.PROBE_TEXTS)
        for i, tok in enumerate(toks):
            other = toks[(i + 1) % len(toks)]
            texts += [
                tok,
                tok + tok,
                tok + other,
                other + "x" + tok,
                "a" + tok + "b",
                " " + tok + " ",
                "\n" + tok + "\n\n",
                "word" + tok + "word",
                "日本" + tok + "🙂",
                "1" + tok + "2",
                tok + "Hello, world!" + other + " reply " + tok,
                "  " + tok + "  " + other + "  ",
                tok[:-1] + " " + tok,
                tok + tok[1:],
                tok[:-1] + tok + tok[1:],
                "\t" + tok + "\t",
            ]
        return texts

    def _probe(self) -> str:
        texts = self.probe_texts()
        # Whole texts through the tokenizer's own call (vLLM's path), pieces through the miss path.
        whole = [self.adapter.encode(t, False) for t in texts]
        split = [self.splitter.split(t) for t in texts]
        pieces = [r for regions, _ in split for r in regions if r]
        encoded = iter(self.adapter.encode_regions(pieces)) if pieces else iter(())
        for text, expected, (regions, seps) in zip(texts, whole, split):
            joined: list[int] = []
            for i, region in enumerate(regions):
                if region:
                    joined.extend(next(encoded))
                if i < len(seps):
                    joined.append(seps[i])
            if joined != list(expected):
                return f"probe mismatch on {text!r}"
        return ""

    def _probe_chunks(self) -> str:
        """Cut sample texts at every eligible newline and compare with whole encodes."""
        lines = [
            "def f(x):",
            "    return x",
            "}",
            "# ünï 🙂",
            "a.b",
            "1234",
            "'s",
            "x=1;",
            "日本語",
            "--",
            "[ok]",
            "\tindent",
            "  two",
            "end.",
            '"q"',
            "<｜",
            "@dec",
            "~/p",
        ]
        texts = []
        for k in range(len(lines)):
            texts.append("\n".join(lines[k:] + lines[:k]))
            texts.append("\n\n".join(lines[k : k + 5]) + "\nz\ny")
        whole = [self.adapter.encode(t, False) for t in texts]
        cuts = 0
        for text, expected in zip(texts, whole):
            pieces = chunk_region(text, min_chars=1, mask=0)
            cuts += len(pieces) - 1
            joined = [i for ids in self.adapter.encode_regions(pieces) for i in ids]
            if joined != list(expected):
                return f"chunk probe mismatch on {text!r}"
        return "" if cuts else "chunk probe found no cut"

    def _find_affixes(self) -> tuple[list[int], list[int]] | None:
        """IDs that add_special_tokens=True puts around the text (e.g. BOS), if it only adds the same
        prefix and suffix to every text; None sends such prompts to the plain path."""
        empty = self.adapter.encode("", True)
        cuts = set(range(len(empty) + 1))
        for text in ("Hello world", " x ", "日本 🙂") + tuple(self.splitter.atomic)[:4]:
            with_sp = self.adapter.encode(text, True)
            bare = self.adapter.encode(text, False)
            if len(with_sp) != len(bare) + len(empty):
                return None
            cuts &= {
                k
                for k in range(len(empty) + 1)
                if with_sp[k : k + len(bare)] == bare and with_sp[:k] + with_sp[k + len(bare) :] == empty
            }
        if len(cuts) != 1:
            return None
        cut = cuts.pop()
        return empty[:cut], empty[cut:]


_EMPTY: list[int] = []


def _vocab_size(config: dict[str, Any], added: Sequence[AddedToken]) -> int:
    vocab = (config.get("model") or {}).get("vocab")
    if isinstance(vocab, dict):
        top = max(vocab.values(), default=-1)
    elif isinstance(vocab, list):
        top = len(vocab) - 1
    else:
        top = -1
    return max([top] + [t.id for t in added]) + 1
