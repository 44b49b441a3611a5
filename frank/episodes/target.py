"""The engine an episode run talks to: its URL, served model, the key clients send, its context, and how
the agent gets tool calls out of its model (`tool_calls`, declared by the engine's profile).

The engine frank runs (`frank engine start`) is known by its profile; an engine at another URL (`--url`)
has none, so its agent uses the engine's own tool calls ("native", the default) and frank's placeholder key.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from frank.engine.controller import EngineController
from frank.engine.profiles import ProfileError, load_profile
from frank.errors import FrankError

PLACEHOLDER_KEY = "frank"  # what the harness sends an engine that wants no key (the openai client needs one)


@dataclass(frozen=True)
class EngineTarget:
    url: str
    model: str
    api_key: str
    tool_calls: str  # native | schema (frank.engine.profiles.TOOL_CALL_MODES)
    context_tokens: int | None  # the engine's context per request, when it says
    profile: str | None  # None for an engine frank did not start


def _headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def served_model(url: str, key: str = "") -> str:
    try:
        resp = httpx.get(url + "/v1/models", headers=_headers(key), timeout=10.0)
        resp.raise_for_status()
        return str(resp.json()["data"][0]["id"])
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
        raise FrankError(f"cannot reach the engine at {url} (/v1/models: {exc})") from None


def context_tokens(url: str, key: str = "") -> int | None:
    """vLLM names it in /v1/models (max_model_len), llama.cpp in /props (n_ctx of a slot)."""
    try:
        model = httpx.get(url + "/v1/models", headers=_headers(key), timeout=10.0).json()["data"][0]
        if isinstance(model.get("max_model_len"), int):
            value: int | None = model["max_model_len"]
            return value
        props = httpx.get(url + "/props", headers=_headers(key), timeout=10.0)
        if props.status_code == 200:
            n_ctx = props.json().get("default_generation_settings", {}).get("n_ctx")
            return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None
    except (httpx.HTTPError, KeyError, IndexError, ValueError, AttributeError):
        return None
    return None


def engine_target(url: str | None) -> EngineTarget:
    """The given URL, or the running engine's (a resumed run goes to the engine of now)."""
    controller = EngineController()
    st = controller.status(check_health=False)
    running = st.url.rstrip("/") if st.state == "ready" and st.url else None
    base = (url or running or "").rstrip("/")
    if not base:
        raise FrankError("no engine is ready; start one with `frank engine start` or pass --url")
    ours = base == running
    key = (controller.client_api_key or "") if ours else ""
    mode, profile = "native", None
    if ours and st.profile:
        try:
            mode, profile = load_profile(st.profile).tool_calls, st.profile
        except ProfileError as exc:
            raise FrankError(f"the running engine's profile: {exc}") from None
    return EngineTarget(base, served_model(base, key), key or PLACEHOLDER_KEY, mode, context_tokens(base, key), profile)
