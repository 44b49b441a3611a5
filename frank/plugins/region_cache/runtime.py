"""The process-wide region cache state: one switch, one cache, one encoder per tokenizer.

The initial switch comes from FRANK_REGION_CACHE ("on"/"off"); the control endpoint flips it live.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from frank.plugins.region_cache.core import CacheLimits, HFAdapter, RegionCache, RegionCacheStats, RegionEncoder

logger = logging.getLogger(__name__)
_lock = threading.RLock()
_enabled = os.environ.get("FRANK_REGION_CACHE", "off").strip().lower() in ("on", "1", "true", "yes")
_cache: RegionCache | None = None
# id(tokenizer) -> (tokenizer, encoder); the tokenizer is kept so its id cannot be reused.
_encoders: dict[int, tuple[Any, RegionEncoder | None]] = {}
_MAX_ENCODERS = 16


_refused: str | None = None  # why the cache stays off: vLLM's renderer is not the verified code (compat.py)


class Refused(RuntimeError):
    """Switching on a cache that stayed off because vLLM's internals differ from the verified code."""


def enabled() -> bool:
    return _enabled


def set_enabled(value: bool) -> None:
    global _enabled
    if value and _refused:
        raise Refused(_refused)
    _enabled = bool(value)


def refuse(reason: str) -> None:
    """Off for good in this process (the hook was not installed)."""
    global _enabled, _refused
    _refused, _enabled = reason, False


def cache() -> RegionCache:
    """The process's RegionCache (sized from the environment on first use)."""
    global _cache
    if _cache is None:
        with _lock:
            if _cache is None:
                try:
                    _cache = RegionCache.from_env()
                except ValueError as exc:  # a bad variable must not fail requests: say so, use defaults
                    logger.error("%s; using the default limits", exc)
                    _cache = RegionCache(CacheLimits())
    return _cache


def encoder_for(tokenizer: Any) -> RegionEncoder | None:
    """The encoder for a HF fast tokenizer (built and probed once), or None for any other kind."""
    entry = _encoders.get(id(tokenizer))
    if entry is not None and entry[0] is tokenizer:
        return entry[1]
    with _lock:
        entry = _encoders.get(id(tokenizer))
        if entry is not None and entry[0] is tokenizer:
            return entry[1]
        encoder = None
        if hasattr(tokenizer, "backend_tokenizer"):
            encoder = RegionEncoder(HFAdapter(tokenizer), cache())
        if len(_encoders) >= _MAX_ENCODERS:
            _encoders.pop(next(iter(_encoders)))
        _encoders[id(tokenizer)] = (tokenizer, encoder)
        return encoder


def clear() -> None:
    cache().clear()


def snapshot() -> RegionCacheStats:
    """Stats for the control endpoint and /metrics: the cache's counters plus the switch and tokenizers."""
    out = cache().stats()
    out["enabled"] = _enabled
    from frank.plugins import compat

    verdict = compat.verdict_of("region-cache")
    if verdict is not None:
        out["compat"] = verdict.to_json()
    if _refused:
        out["refused"] = _refused
    out["tokenizers"] = [
        {"class": type(tok).__name__, "refused": enc.refused if enc else "not a fast tokenizer"}
        for tok, enc in list(_encoders.values())
    ]
    return out
