"""The prompt IDs handed to the engine core as a delta against a prompt both processes hold: a
`vllm.general_plugins` entry point with one half in the API server and one in the engine core.

What vLLM does (0.32, v1/engine/core_client.py and core.py): the API server msgpack-encodes every request's
whole `prompt_token_ids` and the engine core's input thread decodes it, building one new Python int per
token: 3.8 ms for a 170K-token prompt, on every turn of a conversation whose previous turn sent the same
170K tokens a moment ago. A typed array instead of a msgpack list saves nothing: rebuilding the list's int
objects is the cost, whatever the wire format (measured: docs/front-end-parts.md).

The cut: both processes hold the last few prompts sent (numbered by the API server in the order it sends
them; the API server names only its newest `HOLD`, the engine core keeps `CORE_HOLD`). A request whose
prompt starts with a held prompt's first `common` tokens is sent as (ref, ref length, common, suffix); the
engine core rebuilds it as `held[ref][:common] + suffix` (one copy of pointers to int objects it already
has) before vLLM's own preprocessing sees the request. Where the region cache recorded what a sent list was
joined from, the API server holds a view of that join (`JoinedView`: the same IDs, read from the cached
regions) rather than the list, so the list dies with its request: eight held 170K-entry lists cost the API
server's young-generation GC collections 5-8 ms each (docs/front-end-parts.md).

Why it is exact. The zmq socket between them delivers in order, and each side applies the same rule on the
same sequence of numbered prompts: prompt h is held after it was sent (API server) / rebuilt (engine core),
the API server keeps those numbered above `h - HOLD` and the engine core above `h - CORE_HOLD`. So the
engine core's prompt `ref` is the list the API server sent as `ref`, and the API server established
`ids[:common] == held[ref][:common]` (never from a sample or a hash) before choosing the delta: compared in
full, or, where both lists are the region cache's joins of the same cached region lists, region by region
(the same list objects skipped, the first differing region compared; region_cache/composition.py says why
a record is faithful). The engine core checks that it holds `ref` with the stated length; anything else
fails the request with an error (never a guess). Requests that could grow their prompt in place
(resumable sessions), multimodal, prompt-embeds, shorter than `MIN_TOKENS` or sent by a data-parallel
client go whole and are not held.

Fail-closed on the wire: a delta travels with `prompt_token_ids = None` and the delta in
`reasoning_parser_kwargs[KEY]` (an untyped field the engine core's decoder passes through), so an engine
core without this plugin rejects it (vLLM: "Neither prompt_token_ids nor prompt_embeds were defined")
instead of serving the suffix as a prompt. The engine-core half is installed whenever the plugin loads; the
API-server half is switched live (`FRANK_HELD_PROMPT`, /frank/parts/held-prompt), so with the knob off vLLM
sends and decodes exactly as before (the core's hook only looks for the key).

In the engine core, what a request leaves behind (the prompt let go of, the finished request's vLLM
`Request`) is freed in the engine core's idle time (idle_release.py), and vLLM's exact-size copy of the
prompt becomes the prompt held while the rebuilt list, which has room, grows with the output
(`_swap_token_lists`).

`FRANK_HELD_PROMPT_VERIFY` (off | all | a fraction, API server): a sampled delta also carries the whole
list in `prompt_token_ids`; the engine core compares its rebuilt list with it, counts `verified` and
`mismatches`, and on a mismatch serves the whole list and logs an error. The engine core's counters come
through a utility call (GET /frank/parts/held-prompt shows both halves).
"""

from __future__ import annotations

import itertools
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

from frank.plugins import compat
from frank.plugins.front_end.catalog import PARTS
from frank.plugins.front_end.idle_release import IdleRelease
from frank.plugins.front_end.idle_release import install as install_idle_release
from frank.plugins.front_end.switch import PartSwitch, SwitchSnapshot
from frank.plugins.region_cache.composition import Composition, JoinedView, composition_of
from frank.plugins.region_cache.composition import take as take_composition

logger = logging.getLogger(__name__)
PART = PARTS["held-prompt"]
KEY = "__frank_held_prompt__"  # the delta's key in reasoning_parser_kwargs
VERSION = 1
HOLD = 8  # prompts the API server holds per client and may name (a W01 draw interleaves six conversations)
CORE_HOLD = 2 * HOLD  # the engine core keeps more: see HeldPrompts
MIN_TOKENS = 1024  # shorter prompts go whole and are not held: a delta would save little
MIN_COMMON = 512  # a delta needs at least this many common tokens
CHUNK = 8192  # tokens compared per slice while looking for the common prefix
STATS_UTILITY = "frank_held_prompt_stats"
# Both halves' hooks, the request type the delta travels in, and the Request whose lists trade places
# (compat.py): one verdict for both, as the halves are exact only together.
PATCHES = compat.Patches(
    PART.name,
    (
        compat.Target(
            "vllm.v1.engine.core_client:AsyncMPClient.add_request_async",
            {"0.32.0": ("async (self, request)", "5c209545cf8e55a0")},
        ),
        compat.Target("vllm.v1.engine:EngineCoreRequest", {"0.32.0": ("class(msgspec.Struct)", "1ae5491fd86e7f25")}),
        compat.Target(
            "vllm.v1.engine.core:EngineCore.preprocess_add_request", {"0.32.0": ("(self, request)", "47fc9f4134ba15c6")}
        ),
        compat.Target(
            "vllm.v1.request:Request.__init__",
            {
                "0.32.0": (
                    "(self, request_id, prompt_token_ids, sampling_params, pooling_params, client_index=, "
                    "arrival_time=, prompt_embeds=, prompt_is_token_ids=, mm_features=, lora_request=, cache_salt=, "
                    "priority=, trace_headers=, block_hasher=, resumable=, session_id=, reasoning_ended=, "
                    "reasoning_parser_kwargs=, abort_immediately=, kv_hints=)",
                    "f774bfc06047122b",
                )
            },
        ),
    ),
)

# the API-server half (live). Its faults, deliberate breakage on demand (POST /frank/parts/held-prompt/fault):
# - token-dropped: every delta loses the last token of the common prefix (a wrong API-server half, acting on
#   a repeated prompt too): the engine core rebuilds a prompt a token short (verify on: caught, the whole list
#   served; off: a wrong prompt, which is what the engine-free check shows the test can see);
# - lost-sync: every delta names a prompt the engine core never held (the halves out of step): the engine
#   core's check fails the request (verify on: the whole list served). The revert loop's test uses it.
# A faulted request is not held by the API server, so the halves agree again once the fault is cleared.
FAULT_TOKEN_DROPPED = "token-dropped"
FAULT_LOST_SYNC = "lost-sync"
switch = PartSwitch(PART.name, PART.env, PART.verify_env, faults=(FAULT_TOKEN_DROPPED, FAULT_LOST_SYNC))
core_switch = PartSwitch(PART.name, PART.env, PART.verify_env)  # the engine-core half's counters
core_switch.set_enabled(True)  # the core rebuilds any delta it is sent, whatever the knob


class HeldPrompts:
    """Numbered prompts, those above `newest put - hold`, keyed by client: the same rule on both sides of
    the socket. The API server numbers prompts in the order it sends them, but holds each once its send
    returned, so concurrent requests can be held out of order; the engine core keeps twice as many
    (CORE_HOLD), so a prompt the API server may still name has not left it unless more than HOLD requests
    were in flight at once (and then the request fails on the check; it is never rebuilt wrong)."""

    def __init__(self, hold: int = HOLD) -> None:
        self.hold = hold
        self._by_client: dict[int, dict[int, Any]] = {}
        self.let_go: Callable[[Any], None] | None = None  # given what is no longer held, else it is freed here

    def put(self, client: int, number: int, value: Any) -> None:
        held = self._by_client.setdefault(client, {})
        held[number] = value
        for old in [n for n in held if n <= number - self.hold]:
            gone = held.pop(old)
            if self.let_go is not None:
                self.let_go(gone)

    def get(self, client: int, number: int) -> Any:
        return self._by_client.get(client, {}).get(number)

    def newest_first(self, client: int) -> list[tuple[int, Any]]:
        return sorted(self._by_client.get(client, {}).items(), reverse=True)

    def clear(self) -> None:
        self._by_client.clear()


Prompt = list[int] | JoinedView  # a held prompt: the list, or a view of the region cache's join


def common_prefix(a: list[int], b: Prompt, chunk: int = CHUNK, start: int = 0) -> int:
    """The length of the longest common prefix of two lists, by whole-slice comparisons (C loops), from
    `start` (the caller knows a[:start] == b[:start])."""
    n = min(len(a), len(b))
    i = start
    while i < n:
        j = min(i + chunk, n)
        if a[i:j] != b[i:j]:  # the first difference is in this chunk: halve it with slice comparisons
            while j - i > 16:
                mid = (i + j) // 2
                if a[i:mid] == b[i:mid]:
                    i = mid
                else:
                    j = mid
            while a[i] == b[i]:
                i += 1
            return i
        i = j
    return n


def common_prefix_by_regions(
    a: list[int], a_joined: Composition | None, b: Prompt, b_joined: Composition | None
) -> int | None:
    """The common prefix of a and b from what the region cache joined them from, or None when either has
    no record or a record that does not describe it (then the caller compares them in full).

    Regions that are the same list object hold the same IDs (the cache never changes a list it holds:
    region_cache/composition.py), so they are skipped by length; any other region pair is compared by
    value (a C loop over that region only) and skipped if equal; cut tokens are compared. From the first
    region or cut token that differs, the lists themselves are compared up to their first difference."""
    if a_joined is None or b_joined is None or len(a) != a_joined.length or len(b) != b_joined.length:
        return None
    ra, rb, sa, sb = a_joined.regions, b_joined.regions, a_joined.seps, b_joined.seps
    i = 0
    for k in range(min(len(ra), len(rb))):
        x, y = ra[k], rb[k]
        if x is not y and (len(x) != len(y) or x != y):
            break
        i += len(x)
        if k >= len(sa) or k >= len(sb) or sa[k] != sb[k]:
            break
        i += 1
    return common_prefix(a, b, start=i)


Held = tuple[int, Prompt, Composition | None]  # (number, prompt, what the region cache joined it from)


def choose_reference(
    ids: list[int], held: list[Held], joined: Composition | None = None
) -> tuple[int, Prompt, int] | None:
    """(number, held list, common) for the held prompt sharing the longest prefix with ids, or None.

    The usual case (an agent's next turn: its previous prompt plus the turn) is found first: the longest
    held prompt whose last token matches ids at the same place and that compares equal whole. Then any
    longer held prompt that agrees at that length is compared up to its first difference. Every candidate
    passes a cheap screen first (the first token and the token at MIN_COMMON), and is compared once:
    region by region where both lists came from the region cache (`joined`), else in full. Whatever is
    chosen, ids[:common] == held[:common] is certain, never a sample or a hash."""
    n = len(ids)
    screened = sorted(
        (
            (number, ref, ref_joined)
            for number, ref, ref_joined in held
            if len(ref) >= MIN_COMMON and ref[0] == ids[0] and ref[MIN_COMMON - 1] == ids[MIN_COMMON - 1]
        ),
        key=lambda item: len(item[1]),
        reverse=True,
    )
    commons: dict[int, int] = {}

    def common(number: int, ref: Prompt, ref_joined: Composition | None) -> int:
        c = commons.get(number)
        if c is None:
            c = common_prefix_by_regions(ids, joined, ref, ref_joined)
            switch.count("compared_in_full" if c is None else "compared_by_regions")
            commons[number] = c = common_prefix(ids, ref) if c is None else c
        return c

    best: tuple[int, Prompt, int] | None = None
    for number, ref, ref_joined in screened:
        m = len(ref)
        if m <= n and ref[-1] == ids[m - 1] and ref[m // 2] == ids[m // 2] and common(number, ref, ref_joined) == m:
            best = (number, ref, m)
            break
    floor = best[2] if best else MIN_COMMON
    for number, ref, ref_joined in screened:
        if len(ref) <= floor or (best and ref[floor - 1] != ids[floor - 1]):
            continue
        c = common(number, ref, ref_joined)
        if c >= floor and (best is None or c > best[2]):
            best = (number, ref, c)
    return best


# ---- API server ----

_held = HeldPrompts()
_numbers = itertools.count(1)
_lock = threading.Lock()


def _eligible(request: Any) -> bool:
    ids = request.prompt_token_ids
    return (
        isinstance(ids, list)
        and len(ids) >= MIN_TOKENS
        and not request.mm_features
        and request.prompt_embeds is None
        and request.prompt_is_token_ids is None
        and not request.resumable
        and not (request.reasoning_parser_kwargs and KEY in request.reasoning_parser_kwargs)
    )


def plan(client: int, request: Any) -> tuple[int, Any, bool]:
    """(number, the request as it goes on the wire, whether to hold it once sent) for an eligible request;
    counts what it chose."""
    import msgspec

    ids: list[int] = request.prompt_token_ids
    with _lock:
        candidates = [(n, ref, joined) for n, (ref, joined) in _held.newest_first(client)]
        number = next(_numbers)
    found = choose_reference(ids, candidates, composition_of(ids))
    faulted = found is not None and switch.fault is not None
    if found is None:
        # the wire form: [version, reference, its length, common, number, the ids after common (None: whole)]
        delta: list[int | list[int] | None] = [VERSION, 0, 0, 0, number, None]
        switch.count("sent_whole")
        wire_ids: list[int] | None = ids
    else:
        ref_number, ref, common = found
        if faulted:
            switch.count("faulted")
        dropped = 1 if switch.fault == FAULT_TOKEN_DROPPED else 0
        sent_ref = -ref_number if switch.fault == FAULT_LOST_SYNC else ref_number
        delta = [VERSION, sent_ref, len(ref), common - dropped, number, ids[common:]]
        switch.count("sent_delta")
        switch.count("tokens_not_sent", common)
        wire_ids = ids if switch.should_verify() else None
        if wire_ids is not None:
            switch.count("verify_sent")
    kwargs = dict(request.reasoning_parser_kwargs or {})
    kwargs[KEY] = delta
    wire = msgspec.structs.replace(request, prompt_token_ids=wire_ids, reasoning_parser_kwargs=kwargs)
    return number, wire, not faulted


def hold_sent(client: int, number: int, ids: list[int]) -> None:
    """Hold a prompt the API server has sent, with the region cache's record of what it was joined from.
    With a record, what is held is a view of the join (the same IDs read from the cached regions), not the
    list: the list then dies with its request instead of being traversed by the cyclic GC while held
    (region_cache/composition.py)."""
    joined = take_composition(ids)
    held: list[int] | JoinedView = ids
    if joined is not None:
        try:
            held = JoinedView(joined)
        except ValueError:  # a record that does not add up is not used
            joined = None
    with _lock:
        _held.put(client, number, (held, joined))


def install_api_server() -> None:
    from vllm.v1.engine import core_client

    cls = core_client.AsyncMPClient
    original = cls.add_request_async
    if getattr(original, "_frank_held_prompt", False):
        return
    verdict = compat.admit(PATCHES)
    if not verdict.compatible:  # never patched blindly: off, and /frank/parts/held-prompt says why
        switch.refuse(verdict.reason)
        return

    async def add_request_async(self: Any, request: Any) -> None:
        # only the single-engine client: a data-parallel client overrides this method and sends whole
        if not switch.enabled or type(self) is not cls or not _eligible(request):
            return await original(self, request)
        try:
            number, wire, hold = plan(self.client_index, request)
        except Exception:
            switch.count("errors")
            logger.exception("frank held-prompt: error, sending the whole prompt")
            return await original(self, request)
        request.client_index = self.client_index
        await original(self, wire)  # encoded and queued on the socket before this returns
        if hold:  # held only once sent: the engine core holds it once it has it
            hold_sent(self.client_index, number, request.prompt_token_ids)

    # marks on the patch itself (a function declares no attributes): frank.plugins.compat reads them
    add_request_async._frank_held_prompt = True  # type: ignore[attr-defined]
    add_request_async.__wrapped__ = original  # type: ignore[attr-defined]
    cls.add_request_async = add_request_async
    logger.info("frank held-prompt: hooked AsyncMPClient.add_request_async (enabled=%s)", switch.enabled)


# ---- engine core ----

_core_held = HeldPrompts(CORE_HOLD)
_idle_release = IdleRelease()  # the engine core's idle time frees what requests leave behind (idle_release.py)


class HeldPromptError(ValueError):
    """A delta the engine core cannot rebuild exactly: the request fails with this message."""


def rebuild(client: int, request: Any) -> tuple[int, int, int, bool]:
    """Replace a delta in `request` (an EngineCoreRequest) with its whole prompt, and hold it.

    Returns (number, ref, common, verified): ref 0 and common 0 when nothing was rebuilt from a held
    prompt; verified when the API server sent the whole list too."""
    kwargs = dict(request.reasoning_parser_kwargs)
    delta = kwargs.pop(KEY)
    request.reasoning_parser_kwargs = kwargs or None
    try:
        version, ref_number, ref_len, common, number, suffix = delta
    except (TypeError, ValueError):
        raise HeldPromptError(f"frank held-prompt: malformed delta {delta!r:.200}") from None
    if version != VERSION:
        raise HeldPromptError(f"frank held-prompt: delta version {version}, this engine core reads {VERSION}")
    whole = request.prompt_token_ids
    rebuilt_from = (0, 0)
    if ref_number == 0:
        if not isinstance(whole, list):
            raise HeldPromptError("frank held-prompt: a whole prompt to hold came without its IDs")
        core_switch.count("received_whole")
        ids = whole
    else:
        ref = _core_held.get(client, ref_number)
        if ref is None or len(ref) != ref_len or not 0 < common <= ref_len or not isinstance(suffix, list):
            held = None if ref is None else len(ref)
            problem = (
                f"frank held-prompt: request {request.request_id}: prompt {ref_number} of client {client} "
                f"held with {held} tokens, the delta says {ref_len} (common {common}): not rebuilt"
            )
            if not isinstance(whole, list):
                core_switch.count("errors")
                logger.error("%s", problem)
                raise HeldPromptError(problem)
            ids = None  # verify: the whole list came too; serve it
        else:
            ids = ref[:common]
            ids += suffix
            rebuilt_from = (ref_number, common)
            core_switch.count("rebuilt")
            core_switch.count("tokens_not_decoded", common)
        if whole is not None:  # verify: the API server sent the whole list too
            core_switch.count("verified")
            if ids != whole:
                core_switch.count("mismatches")
                logger.error(
                    "frank held-prompt: request %s: rebuilt prompt differs from the one sent whole (%s); "
                    "serving the whole one",
                    request.request_id,
                    "not rebuilt" if ids is None else f"{len(ids)} tokens against {len(whole)}",
                )
                ids = whole
                rebuilt_from = (0, 0)
    request.prompt_token_ids = ids
    _core_held.put(client, number, ids)
    return number, rebuilt_from[0], rebuilt_from[1], whole is not None


_core_hashes = HeldPrompts(CORE_HOLD)  # number -> (the Request's block_hashes list, its extra-key signature)


def _hash_block_size(hasher: Any) -> int | None:
    """The block size vLLM's request hasher hashes at (a variable of its closure), or None if unreadable."""
    try:
        cells = zip(hasher.__code__.co_freevars, (c.cell_contents for c in hasher.__closure__ or ()))
        value = dict(cells).get("hash_block_size")
    except (AttributeError, ValueError):
        return None
    return value if isinstance(value, int) and value > 0 else None


def _signature(request: Any) -> tuple[Any, ...] | None:
    """What a block hash depends on besides the tokens, for the requests whose hashes are reused here: the
    cache salt (the first block's extra key). None for anything with other extra keys (LoRA, multimodal,
    prompt embeds): those are hashed by vLLM as usual."""
    if request.lora_request is not None or request.mm_features or request.prompt_embeds is not None:
        return None
    return ("salt", request.cache_salt)


def reusable_hashes(client: int, ref: int, common: int, request: Any, hasher: Any) -> list[Any] | None:
    """The held prompt's block hashes for the blocks wholly inside the common prefix, or None.

    Exact: vLLM's hash of block i is a function of the parent hash, the block's tokens and its extra keys;
    for i < common // block size the tokens are the same as the held prompt's (rebuilt from them) and the
    extra keys are equal (the same signature), so by induction from the first block every hash is equal."""
    if not ref:
        return None
    held = _core_hashes.get(client, ref)
    size = _hash_block_size(hasher)
    if held is None or size is None:
        return None
    hashes, signature = held
    if signature is None or signature != _signature(request):
        return None
    k = min(common // size, len(hashes))
    return list(hashes[:k]) if k else None


def _prefilled(hasher: Any, reused: list[Any]) -> Any:
    """vLLM's request hasher, with the reused hashes put in place at its first call (in Request.__init__):
    it then hashes from the first block past them, as it does for every later block of a request."""
    pending = [reused]

    def request_block_hasher(request: Any) -> list[Any]:
        if pending:
            request.block_hashes.extend(pending.pop())
        return hasher(request)

    return request_block_hasher


def install_engine_core(core_module: Any) -> None:
    cls = core_module.EngineCore
    if not hasattr(cls, STATS_UTILITY):
        setattr(cls, STATS_UTILITY, lambda self: core_snapshot())
    original = cls.preprocess_add_request
    if getattr(original, "_frank_held_prompt", False):
        return
    verdict = compat.admit(PATCHES)
    if not verdict.compatible:  # a delta then fails as vLLM fails it (fail-closed on the wire)
        core_switch.refuse(verdict.reason)
        return

    def preprocess_add_request(self: Any, request: Any) -> Any:
        kwargs = request.reasoning_parser_kwargs
        if not (kwargs and KEY in kwargs):
            return original(self, request)
        return preprocess_delta(self, request, original)

    # marks on the patch itself (a function declares no attributes): frank.plugins.compat reads them
    preprocess_add_request._frank_held_prompt = True  # type: ignore[attr-defined]
    preprocess_add_request.__wrapped__ = original  # type: ignore[attr-defined]
    cls.preprocess_add_request = preprocess_add_request
    if install_idle_release(core_module, _idle_release):
        _core_held.let_go = _idle_release.defer
    logger.info("frank held-prompt: hooked EngineCore.preprocess_add_request")


def preprocess_delta(core: Any, request: Any, original: Any) -> Any:
    """vLLM's preprocessing of a request that came as a delta: the prompt rebuilt first, and the block
    hashes of the common prefix taken from the held prompt (verify: computed by vLLM and compared)."""
    client = request.client_index
    number, ref, common, verified = rebuild(client, request)
    hasher = core.request_block_hasher
    reused = reusable_hashes(client, ref, common, request, hasher) if hasher is not None else None
    if reused and not verified:
        core.request_block_hasher = _prefilled(hasher, reused)  # the input thread is the only caller
    try:
        result = original(core, request)
    finally:
        core.request_block_hasher = hasher
    req = result[0]
    if reused:
        if verified:
            core_switch.count("hashes_verified", len(reused))
            if req.block_hashes[: len(reused)] != reused:
                core_switch.count("hash_mismatches")
                logger.error("frank held-prompt: request %s: reused block hashes differ from vLLM's", req.request_id)
        else:
            core_switch.count("hashes_reused", len(reused))
    _core_hashes.put(client, number, (req.block_hashes, _signature(request)))
    if ref and _swap_token_lists(req):
        core_switch.count("token_lists_swapped")
        request.prompt_token_ids = req.prompt_token_ids
        _core_held.put(client, number, req.prompt_token_ids)
    if _core_held.let_go is not None:
        _idle_release.watch(req)
    return result


def _swap_token_lists(req: Any) -> bool:
    """vLLM's `Request` keeps the prompt (`prompt_token_ids`, the list it was given: here the rebuilt one)
    and an exact-size copy that grows with the output (`_all_token_ids`), so the first output token's append
    reallocates 120K-181K pointers (0.2 ms). The rebuilt list has room to grow (it was extended by the
    suffix), so the two equal lists trade places: the copy becomes the prompt, held from now on, and the
    rebuilt list the one that grows. Only for a request with no output yet, both lists equal in length;
    True when swapped."""
    from vllm.v1.utils import ConstantList

    rebuilt, copy = req.prompt_token_ids, req._all_token_ids
    if copy is rebuilt or len(copy) != len(rebuilt) or req._output_token_ids or req.all_token_ids._x is not copy:
        return False
    req.prompt_token_ids, req._all_token_ids = copy, rebuilt
    req.all_token_ids = ConstantList(rebuilt)
    return True


def prompt_digest(ids: list[int]) -> str:
    """sha256 of the IDs as little-endian int64: what a client can compute from the prompt_token_ids it gets."""
    import array
    import hashlib

    packed = array.array("q", ids)
    if sys.byteorder != "little":
        packed.byteswap()
    return hashlib.sha256(packed.tobytes()).hexdigest()


def core_snapshot() -> SwitchSnapshot:
    """The engine core's counters and the prompts it holds (number, tokens, digest: computed here, on a
    stats call, never per request), so a test can compare them with the prompts the API server sent."""
    out = core_switch.snapshot()
    out["idle_release"] = _idle_release.snapshot()
    out["held"] = [
        {"client": client, "number": number, "tokens": len(ids), "sha256": prompt_digest(ids)}
        for client, held in sorted(_core_held._by_client.items())
        for number, ids in sorted(held.items())
    ]
    return out


def register() -> None:
    """Entry point: the engine-core half where vLLM's engine core is loaded, the API-server half in the API
    server (vLLM loads general plugins in every process)."""
    from frank.plugins.front_end.plugin_util import is_api_server_process

    try:
        core = sys.modules.get("vllm.v1.engine.core")
        if core is not None and not is_api_server_process():
            install_engine_core(core)
        if is_api_server_process():
            from frank.plugins.front_end.metrics import register_metrics

            register_metrics(switch)
            install_api_server()
    except Exception:  # a broken hook must never stop the server
        logger.exception("frank held-prompt: not installed")
