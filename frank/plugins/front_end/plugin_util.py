"""Which vLLM process a plugin is loaded in (vLLM loads general plugins in every one of its processes)."""

from __future__ import annotations

import multiprocessing


def is_api_server_process() -> bool:
    """The top-level process (no multiprocessing parent) or one of vLLM's own API server children."""
    if multiprocessing.parent_process() is None:
        return True
    return multiprocessing.current_process().name.lower().startswith("apiserver")
