"""Runs in the engine venv (tests/unit/test_plugin_compat.py starts it): frank's parts loaded into vLLM 0.32
whose internals were changed in this process before each part registers, as another vLLM would have them.
Prints one JSON object.

    .venv-engine/bin/python tests/unit/plugin_compat_engine_check.py

- region cache: `BaseRenderer._tokenize_prompt` replaced by a function of the same signature and other code
  (it lower-cases the prompt first), FRANK_REGION_CACHE=on: the hook must not be installed (the changed
  function is still there), the cache is off, and its control endpoint (GET /frank/region-cache, through
  the real ASGI middleware with the token) says why; switching it on is refused (409);
- detok-tail: `FastIncrementalDetokenizer._protected_step` given another signature: the part stays off,
  GET /frank/parts/detok-tail says why, POST on is refused (409), GET /frank/parts lists its verdict;
- block-hash-memo: `hash_block_tokens` replaced: not installed;
- held-prompt, untouched: installed (the check passes on vLLM as it is);
- /metrics: frank:plugin_compatible is 0 for the changed parts, 1 for held-prompt; frank:plugins_refused.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

TOKEN = "compat-check-token"


async def _asgi(app: Any, method: str, path: str, body: bytes = b"") -> tuple[int, dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "headers": [(b"x-frank-token", TOKEN.encode())]}
    await app(scope, receive, send)
    return sent[0]["status"], json.loads(sent[1]["body"])


async def _not_ours(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError(f"the control passed {scope['path']} on")


def main() -> None:
    os.environ.update(FRANK_REGION_CACHE="on", FRANK_DETOK_TAIL="on", FRANK_BLOCK_HASH_MEMO="on")
    os.environ["FRANK_HELD_PROMPT"] = "on"
    out: dict[str, Any] = {}

    from vllm.renderers.base import BaseRenderer

    def _tokenize_prompt(self: Any, prompt: Any, params: Any) -> Any:  # another vLLM's code, same signature
        prompt = {**prompt, "prompt": str(prompt.get("prompt", "")).lower()}
        return changed_from(self, prompt, params)

    changed_from = BaseRenderer._tokenize_prompt
    BaseRenderer._tokenize_prompt = _tokenize_prompt

    from vllm.v1.engine.detokenizer import FastIncrementalDetokenizer

    def _protected_step(self: Any, next_token_id: int, skip: bool = False) -> Any:  # another signature
        return None

    FastIncrementalDetokenizer._protected_step = _protected_step

    from vllm.v1.core import kv_cache_utils

    changed_hash = kv_cache_utils.hash_block_tokens

    def hash_block_tokens(hash_function: Any, parent_block_hash: Any, curr_block_token_ids: Any, extra_keys=None):
        return changed_hash(hash_function, parent_block_hash, list(curr_block_token_ids), extra_keys)

    kv_cache_utils.hash_block_tokens = hash_block_tokens

    os.environ["FRANK_CONTROL_TOKEN"] = TOKEN
    from frank.plugins.front_end import block_hash_memo, detok_tail, held_prompt
    from frank.plugins.front_end.control import PartsControlMiddleware
    from frank.plugins.region_cache import plugin
    from frank.plugins.region_cache.control import ControlMiddleware

    plugin.register()
    detok_tail.register()
    block_hash_memo.register()
    held_prompt.register()  # this process is the top-level one: its API-server half

    out["tokenize_prompt_untouched"] = BaseRenderer._tokenize_prompt is _tokenize_prompt
    out["protected_step_untouched"] = FastIncrementalDetokenizer._protected_step is _protected_step
    out["hash_untouched"] = kv_cache_utils.hash_block_tokens is hash_block_tokens
    from vllm.v1.engine.core_client import AsyncMPClient

    out["held_prompt_installed"] = bool(getattr(AsyncMPClient.add_request_async, "_frank_held_prompt", False))

    region = ControlMiddleware(_not_ours)
    parts = PartsControlMiddleware(_not_ours)
    out["region_get"] = asyncio.run(_asgi(region, "GET", "/frank/region-cache"))
    out["region_on"] = asyncio.run(_asgi(region, "POST", "/frank/region-cache", b'{"enabled": true}'))
    out["detok_get"] = asyncio.run(_asgi(parts, "GET", "/frank/parts/detok-tail"))
    out["detok_on"] = asyncio.run(_asgi(parts, "POST", "/frank/parts/detok-tail", b'{"enabled": true}'))
    out["parts_get"] = asyncio.run(_asgi(parts, "GET", "/frank/parts"))
    out["block_hash_memo"] = block_hash_memo.snapshot()

    from prometheus_client import REGISTRY, generate_latest

    out["metrics"] = [
        line
        for line in generate_latest(REGISTRY).decode().splitlines()
        if line.startswith(("frank:plugin_compatible{", "frank:plugins_refused ", "frank:region_cache_enabled "))
    ]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
