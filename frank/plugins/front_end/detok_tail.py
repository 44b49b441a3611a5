r"""Detokenizer priming with the prompt tail it needs: a `vllm.general_plugins` entry point (API server).

What vLLM does (0.32, v1/engine/detokenizer.py): `FastIncrementalDetokenizer` primes a `tokenizers`
`DecodeStream(ids=prompt)` with the whole prompt. Its first `step` (tokenizers' `step_decode_stream`)
decodes the whole prompt to set its prefix, appends the new token, decodes everything again and returns
the text past the prefix; then it keeps only the new tokens. Every step that returns nothing (an
incomplete UTF-8 character) decodes the whole prompt again. On a 170K-token prompt that is 31-36 ms of
the API server's time per request, at the first output token.

Why a tail gives the same text. With a `ByteLevel` decoder (GPT-2 style BPE: DeepSeek, the tiny model),
`decode(ids)` is `from_utf8_lossy(b(t1) + b(t2) + ...)` where b(t) are a kept token's bytes (a special
token is dropped when skip_special_tokens is set; tokenizers matches it by content). Cut the prompt into a
head A and a tail T at a token whose first kept byte is not a UTF-8 continuation byte (0x80-0xBF). Then
lossy(A + T + X) = lossy(A) + lossy(T + X) for every X: a character cut at the end of A is broken by a
non-continuation byte exactly as by the end of input (one U+FFFD for the same maximal subpart), and the
decoding of T + X starts afresh at T's first byte. So every `step` sees the same suffix past its prefix,
the same `len` comparison, the same `ends_with('\ufffd')` test (T decodes to at least one character), the
same starts-with check, and drains to the same new tokens: the same output, the same errors and the same
state after the first emitted text. One case differs: when the prefix itself ends with U+FFFD, tokenizers
leaves its prefix empty and the first emission carries the whole primed text; there the whole prompt is
used, as vLLM does. Any other decoder (Metaspace, WordPiece, a Sequence, none) is not proven here: those
requests take vLLM's path, counted as `fallback_decoder`.

On top of the proof: `FRANK_DETOK_TAIL_VERIFY` (off | all | a fraction) also runs vLLM's own full-prompt
stream for a sampled request and compares every step's output; a difference is counted (`mismatches`) and
that request continues on vLLM's stream, so what is returned is always vLLM's text when verified.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from frank.plugins import compat
from frank.plugins.front_end.catalog import PARTS
from frank.plugins.front_end.switch import PartSwitch

logger = logging.getLogger(__name__)
PART = PARTS["detok-tail"]
MIN_TAIL = 16  # tokens primed at least: any cut obeying the rule is exact; a margin costs nothing
MAX_BACK = 64  # how far back past MIN_TAIL to look for a clean cut before taking the whole prompt
REPLACEMENT = "\ufffd"

switch = PartSwitch(PART.name, PART.env, PART.verify_env)
_D = "vllm.v1.engine.detokenizer"
# What the hook wraps (compat.py): the same code in 0.26.0 and 0.32.0. Verified on 0.26.0 on the H200 machine
# (docs/gpu-run.md): FRANK_DETOK_TAIL_VERIFY=all over W01 mini draw-1, outputs identical with the part off.
_SAME = ("0.26.0", "0.32.0")
PATCHES = compat.Patches(
    PART.name,
    (
        compat.Target(
            f"{_D}:BaseIncrementalDetokenizer.__init__", dict.fromkeys(_SAME, ("(self, request)", "b68cbe5cdee94908"))
        ),
        compat.Target(
            f"{_D}:FastIncrementalDetokenizer.__init__",
            dict.fromkeys(_SAME, ("(self, tokenizer, request)", "62640bf446e2e1d8")),
        ),
        compat.Target(
            f"{_D}:FastIncrementalDetokenizer._protected_step",
            dict.fromkeys(_SAME, ("(self, next_token_id)", "f9a109bf9bc3527b")),
        ),
    ),
)


def _gpt2_char_bytes() -> dict[str, int]:
    """ByteLevel's alphabet (GPT-2's bytes_to_unicode), char -> byte, as tokenizers' CHAR_BYTES."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = list(bs)
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


CHAR_BYTES = _gpt2_char_bytes()


class TailPlanner:
    """Where a prompt's tail may start for one Rust tokenizer (`tokenizers.Tokenizer`), or refused."""

    def __init__(self, tokenizer: Any) -> None:
        from tokenizers import decoders

        self.tokenizer = tokenizer
        self.refused: str | None = None
        if type(tokenizer.decoder) is not decoders.ByteLevel:
            self.refused = f"decoder {type(tokenizer.decoder).__name__}: only ByteLevel is proven"
        self._special = {tok.content for tok in tokenizer.get_added_tokens_decoder().values() if tok.special}
        # token id -> its first byte when decoded, or -1 when it adds no bytes; per skip_special_tokens
        self._first: tuple[dict[int, int], dict[int, int]] = ({}, {})

    def first_byte(self, token_id: int, skip_special: bool) -> int:
        memo = self._first[skip_special]
        found = memo.get(token_id)
        if found is None:
            text = self.tokenizer.id_to_token(token_id)
            if text is None or (skip_special and text in self._special):
                found = -1
            else:  # ByteLevel's decode_chain: every char mapped through the alphabet, else the raw UTF-8
                try:
                    found = CHAR_BYTES[text[0]] if all(c in CHAR_BYTES for c in text) else text.encode()[0]
                except IndexError:  # an empty token string adds no bytes
                    found = -1
            memo[token_id] = found
        return found

    def tail_start(self, ids: list[int], skip_special: bool) -> tuple[int, str]:
        """(index the primed tail starts at, why). 0 means the whole prompt (vLLM's own priming)."""
        if self.refused:
            return 0, "fallback_decoder"
        n = len(ids)
        cut = n - MIN_TAIL
        if cut <= 0:
            return 0, "fallback_short"
        first = -1
        for j in range(cut, n):
            first = self.first_byte(ids[j], skip_special)
            if first >= 0:
                break
        limit = max(0, cut - MAX_BACK)
        while first < 0 or 0x80 <= first <= 0xBF:
            if cut <= limit:
                return 0, "fallback_no_clean_cut"
            cut -= 1
            byte = self.first_byte(ids[cut], skip_special)
            if byte >= 0:
                first = byte
        if cut == 0:
            return 0, "fallback_short"
        if self.tokenizer.decode(ids[cut:], skip_special_tokens=skip_special).endswith(REPLACEMENT):
            return 0, "fallback_replacement_end"
        return cut, "tail"


_planners: dict[int, tuple[Any, TailPlanner]] = {}
_planners_lock = threading.Lock()


def planner_for(tokenizer: Any) -> TailPlanner:
    entry = _planners.get(id(tokenizer))
    if entry is not None and entry[0] is tokenizer:
        return entry[1]
    with _planners_lock:
        planner = TailPlanner(tokenizer)
        if len(_planners) >= 16:
            _planners.pop(next(iter(_planners)))
        _planners[id(tokenizer)] = (tokenizer, planner)  # the tokenizer is held so its id is not reused
        return planner


class _TailRequest:
    """The EngineCoreRequest as the detokenizer sees it, with the prompt IDs replaced by the tail."""

    __slots__ = ("_request", "prompt_token_ids")

    def __init__(self, request: Any, tail: list[int]) -> None:
        self._request = request
        self.prompt_token_ids = tail

    def __getattr__(self, name: str) -> Any:
        return getattr(self._request, name)


def register() -> None:
    """Entry point: installs the hook in the API server process only (where vLLM detokenizes)."""
    from frank.plugins.front_end.plugin_util import is_api_server_process

    if not is_api_server_process():
        return
    try:
        from frank.plugins.front_end.metrics import register_metrics

        register_metrics(switch)
        install()
    except Exception:  # a broken hook must never stop the server
        logger.exception("frank detok-tail: not installed")


def install() -> None:
    from vllm.v1.engine import detokenizer

    cls = detokenizer.FastIncrementalDetokenizer
    if getattr(cls.__init__, "_frank_detok_tail", False):
        return
    verdict = compat.admit(PATCHES)
    if not verdict.compatible:  # never patched blindly: off, and /frank/parts/detok-tail says why
        switch.refuse(verdict.reason)
        return
    original_init = cls.__init__
    original_step = cls._protected_step

    def __init__(self: Any, tokenizer: Any, request: Any) -> None:
        tail = _tail_for(tokenizer, request) if switch.enabled else None
        if tail is None:
            original_init(self, tokenizer, request)
            return
        original_init(self, tokenizer, _TailRequest(request, tail))
        if switch.should_verify():  # vLLM's own stream beside ours, compared at every step
            import tokenizers.decoders

            self._frank_full_stream = tokenizers.decoders.DecodeStream(
                ids=request.prompt_token_ids, skip_special_tokens=self.skip_special_tokens
            )
            switch.count("verified")

    def _protected_step(self: Any, next_token_id: int) -> str | None:
        full = self._frank_full_stream
        if full is None:
            return original_step(self, next_token_id)
        return _verified_step(self, full, next_token_id, original_step)

    # marks on the patch itself (a function declares no attributes): frank.plugins.compat reads them
    __init__._frank_detok_tail = True  # type: ignore[attr-defined]
    __init__.__wrapped__ = original_init  # type: ignore[attr-defined]
    _protected_step.__wrapped__ = original_step  # type: ignore[attr-defined]
    cls._frank_full_stream = None
    cls.__init__ = __init__
    cls._protected_step = _protected_step
    logger.info("frank detok-tail: hooked FastIncrementalDetokenizer (enabled=%s)", switch.enabled)


def _tail_for(tokenizer: Any, request: Any) -> list[int] | None:
    """The tail to prime with, or None for vLLM's own priming (counted by reason)."""
    try:
        ids = request.prompt_token_ids
        if not isinstance(ids, list):
            switch.count("fallback_no_prompt_ids")
            return None
        skip = bool(request.sampling_params.skip_special_tokens)
        start, why = planner_for(tokenizer._tokenizer).tail_start(ids, skip)
        switch.count(why)
        if start == 0:
            return None
        switch.count("prompt_tokens_skipped", start)
        return ids[start:]
    except Exception:
        switch.count("errors")
        logger.exception("frank detok-tail: error, priming with the whole prompt")
        return None


def _verified_step(detok: Any, full: Any, next_token_id: int, step: Any) -> str | None:
    """Step our stream and vLLM's; on any difference continue on vLLM's and count it."""
    ours_error: Exception | None = None
    try:
        ours = step(detok, next_token_id)
    except Exception as exc:  # compared below: vLLM's stream decides what happens
        ours, ours_error = None, exc
    ours_stream = detok.stream
    detok.stream = full
    theirs = step(detok, next_token_id)  # raises exactly as vLLM would
    full_after = detok.stream
    if ours_error is not None or ours != theirs:
        switch.count("mismatches")
        logger.error(
            "frank detok-tail: request %s: tail stream gave %r, vLLM's %r (%s); continuing on vLLM's",
            detok.request_id,
            ours,
            theirs,
            ours_error,
        )
        detok._frank_full_stream = None  # detok.stream stays vLLM's
        return theirs
    detok.stream = ours_stream
    detok._frank_full_stream = full_after
    return ours
