"""The `vllm.general_plugins` entry point: hooks the API server's prompt tokenization.

vLLM loads general plugins in every one of its processes (API server, engine core, workers), so
`register()` does nothing unless this is the process that renders prompts: the top-level process (no
multiprocessing parent) or one of vLLM's own API server children (`ApiServer_N` / `APIServer_DP...`).

Verified on vLLM 0.32.0 and 0.26.0 (`PATCHES`: the hook installs only where the renderer's code is one of
theirs, else the cache stays off and its control endpoint says why).

The hook point (vLLM 0.32): `BaseRenderer._tokenize_prompt(prompt, params)` runs `tokenizer(text,
**params.get_encode_kwargs())` for every text prompt: chat completions (the HF renderer and the DeepSeek
V4/V4.1 renderers both render the template to a string with tokenize=False in online serving, see
vllm/renderers/online_renderer.py preprocess_chat), completions and /tokenize alike. It runs on the
renderer's thread pool. It is bound into `make_async` when a renderer is built, so the class attribute
is replaced here, at plugin load, before any renderer exists.

The IDs the cache returns are handed on without vLLM's copy (`_build_tokens_prompt` copies the list), and
vLLM's vocabulary check (`validate_token_ids`: a max and a min over the whole prompt, about 3 ms for a
170K-token prompt) is skipped for exactly those lists: every ID in them came out of this tokenizer (the
cache stores the tokenizer's own output, looked up through a table of range(vocabulary size), and the
cut tokens are the tokenizer's added tokens), so none can be out of its vocabulary. A list is vouched for
by identity and length, once; anything else is checked as before.

Off means vLLM's own method is called with the same arguments. On, a prompt takes the plain path when
it asks for token offsets, when a tokenizer kwarg is one this hook does not know, when it would be
truncated, when the tokenizer is refused (see core), or when anything inside the part raises (counted
as an error; a request never fails because of the cache).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from collections import OrderedDict
from typing import Any

from frank.plugins import compat

logger = logging.getLogger(__name__)
_R = "vllm.renderers.base:BaseRenderer"
# What the hook wraps and calls, as verified (compat.py). 0.26.0 has no vocabulary check on the renderer
# (validate_token_ids), so there is nothing to skip: the install leaves that step out. Verified on 0.26.0 on
# the H200 machine (docs/gpu-run.md): FRANK_REGION_CACHE_VERIFY=all over W01 mini draw-1, 0 mismatches, the
# same prompt IDs as with the cache off.
PATCHES = compat.Patches(
    "region-cache",
    (
        compat.Target(
            f"{_R}.__init__",
            {
                "0.32.0": ("(self, config, tokenizer)", "fd39c8bd8ea0045b"),
                "0.26.0": ("(self, config, tokenizer)", "f118efcb015b445d"),
            },
        ),
        compat.Target(
            f"{_R}._tokenize_prompt",
            {v: ("(self, prompt, params)", "97c62a70d2ac6fb7") for v in ("0.26.0", "0.32.0")},
        ),
        compat.Target(
            f"{_R}._wants_offsets", {v: ("(self, prompt, params)", "32cfecb3d3aba4bb") for v in ("0.26.0", "0.32.0")}
        ),
        compat.Target(
            f"{_R}._build_tokens_prompt",
            {v: ("(token_ids, prompt, *, offset_mapping=)", "3876f52527bfb462") for v in ("0.26.0", "0.32.0")},
        ),
        compat.Target(
            f"{_R}.validate_token_ids",
            {"0.32.0": ("(self, token_ids, *, parameter=)", "5a59964f18cd4d71"), "0.26.0": compat.ABSENT},
        ),
    ),
)

_KNOWN_ENCODE_KWARGS = {"truncation", "max_length", "add_special_tokens"}
_installed = False
# Lists of IDs the cache produced and vLLM has not checked yet: id(list) -> (list, its length). The list is
# held so its id cannot be reused; a few requests in flight at most, so a small bound (past it, the oldest
# are simply checked by vLLM as usual).
_vouched: OrderedDict[int, tuple[list[int], int]] = OrderedDict()
_vouched_lock = threading.Lock()
_MAX_VOUCHED = 8


def register() -> None:
    """Entry point. Cheap and safe anywhere; installs the hook only in the API server process."""
    if os.environ.get("FRANK_REGION_CACHE_HOOK", "1") == "0" or not _is_api_server_process():
        return
    try:
        install()
    except Exception:  # a broken hook must never stop the server: it just serves without the cache
        logger.exception("frank region cache: hook not installed")


def _is_api_server_process() -> bool:
    if multiprocessing.parent_process() is None:
        return True
    return multiprocessing.current_process().name.lower().startswith("apiserver")


def install() -> None:
    global _installed
    if _installed:
        return
    from vllm.renderers.base import BaseRenderer

    original = BaseRenderer._tokenize_prompt
    if getattr(original, "_frank_region_cache", False):
        _installed = True
        return

    from frank.plugins.region_cache import runtime

    verdict = compat.admit(PATCHES)
    _register_metrics()
    if not verdict.compatible:  # never patched blindly: off, and the control endpoint says why
        runtime.refuse(verdict.reason)
        _installed = True
        return

    def _tokenize_prompt(self: Any, prompt: Any, params: Any) -> Any:
        if runtime.enabled():
            out = _cached_tokens_prompt(self, prompt, params)
            if out is not None:
                return out
        return original(self, prompt, params)

    # marks on the patch itself (a function declares no attributes): frank.plugins.compat reads them
    _tokenize_prompt._frank_region_cache = True  # type: ignore[attr-defined]
    _tokenize_prompt.__wrapped__ = original  # type: ignore[attr-defined]
    BaseRenderer._tokenize_prompt = _tokenize_prompt
    if hasattr(BaseRenderer, "validate_token_ids"):  # 0.26 has no such check (PATCHES says so)
        _skip_check_of_vouched_ids(BaseRenderer)
    _warm_encoders_at_renderer_init(BaseRenderer)
    _installed = True
    logger.info("frank region cache: hooked BaseRenderer._tokenize_prompt (enabled=%s)", runtime.enabled())


def _vouch(ids: list[int]) -> None:
    with _vouched_lock:
        _vouched[id(ids)] = (ids, len(ids))
        while len(_vouched) > _MAX_VOUCHED:
            _vouched.popitem(last=False)


def _take_vouched(token_ids: Any) -> bool:
    with _vouched_lock:
        entry = _vouched.pop(id(token_ids), None)
    return entry is not None and entry[0] is token_ids and entry[1] == len(token_ids)


def _skip_check_of_vouched_ids(renderer_cls: Any) -> None:
    original = renderer_cls.validate_token_ids

    def validate_token_ids(self: Any, token_ids: Any, *, parameter: str | None = None) -> None:
        if parameter is None and _take_vouched(token_ids):
            from frank.plugins.region_cache import runtime

            runtime.cache().count(checks_skipped=1)
            return
        original(self, token_ids, parameter=parameter)

    # marks on the patch itself (a function declares no attributes): frank.plugins.compat reads them
    validate_token_ids.__wrapped__ = original  # type: ignore[attr-defined]
    renderer_cls.validate_token_ids = validate_token_ids


def _warm_encoders_at_renderer_init(renderer_cls: Any) -> None:
    """Build and probe each renderer's encoder in a background thread as the renderer is made, so the
    one-off cost (serializing the tokenizer, the probe) lands in the server's start, not in the first
    request after the cache is switched on. Built whatever the switch says: it can be flipped live."""
    original_init = renderer_cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        tokenizer = getattr(self, "tokenizer", None)
        if tokenizer is not None:
            from frank.plugins.region_cache import runtime

            threading.Thread(
                target=_warm, args=(runtime, tokenizer), name="frank-region-cache-warm", daemon=True
            ).start()

    renderer_cls.__init__ = __init__


def _warm(runtime: Any, tokenizer: Any) -> None:
    try:
        runtime.encoder_for(tokenizer)
    except Exception:  # the first request retries, and falls back if it fails again
        logger.exception("frank region cache: encoder warm-up failed")


def _cached_tokens_prompt(renderer: Any, prompt: Any, params: Any) -> Any | None:
    from frank.plugins.region_cache import runtime

    try:
        cache = runtime.cache()
        text = prompt.get("prompt")
        if not isinstance(text, str):
            cache.count_fallback("not_text")
            return None
        if renderer._wants_offsets(prompt, params):
            cache.count_fallback("offsets")
            return None
        kwargs = params.get_encode_kwargs()
        if set(kwargs) - _KNOWN_ENCODE_KWARGS:
            cache.count_fallback("encode_kwargs")
            return None
        encoder = runtime.encoder_for(renderer.get_tokenizer())
        if encoder is None:
            cache.count_fallback("not_fast_tokenizer")
            return None
        ids = encoder.encode(text, bool(kwargs.get("add_special_tokens", True)))
        if ids is None:
            return None
        max_length = kwargs.get("max_length")
        if kwargs.get("truncation") and max_length is not None and len(ids) > max_length:
            cache.count_fallback("truncation")  # the tokenizer would cut it: let it, exactly
            return None
        tokens_prompt = renderer._build_tokens_prompt([], prompt)
        tokens_prompt["prompt_token_ids"] = ids  # the encoder's own fresh list: no copy needed
        _vouch(ids)
        return tokens_prompt
    except Exception:
        runtime.cache().count(errors=1)
        logger.exception("frank region cache: error, falling back to plain tokenization")
        return None


def _register_metrics() -> None:
    """Export the stats as frank:region_cache_* series on the API server's /metrics (default registry)."""
    try:
        from prometheus_client import REGISTRY

        from frank.plugins.region_cache.metrics import RegionCacheCollector

        REGISTRY.register(RegionCacheCollector())
    except Exception:
        logger.exception("frank region cache: /metrics series not registered")
    compat.register_metrics()
