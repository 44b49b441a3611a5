"""Engine kinds: vLLM, llama.cpp and exllamav3. One controller and supervisor run either; a kind says how a profile
becomes a launch (argv and environment), what must exist before it starts, and which key clients send."""

from __future__ import annotations

from typing import Any

from frank.engine.kinds.base import EngineKind
from frank.engine.kinds.exl3 import EXL3
from frank.engine.kinds.llamacpp import LLAMACPP
from frank.engine.kinds.vllm import VLLM
from frank.engine.profiles import LaunchSpec, Profile

KINDS: dict[str, EngineKind] = {kind.name: kind for kind in (VLLM, LLAMACPP, EXL3)}


def kind_of(profile: Profile) -> EngineKind:
    return KINDS[profile.kind]


def build_launch(profile: Profile, knobs: dict[str, Any], port: int, control_token: str) -> LaunchSpec:
    """The exact command line and environment of `profile` with these knob values."""
    return kind_of(profile).build_launch(profile, knobs, port, control_token)


def check_launch(profile: Profile, knobs: dict[str, Any], argv: list[str]) -> None:
    """Model facts the command line must respect (frank.engine.model_facts): a context beyond the model's
    trained length needs RoPE scaling. Raises ProfileError naming the field that sets the context."""
    from frank.engine.model_facts import check_context

    flag = "--ctx-size" if profile.kind == "llamacpp" else "--max-model-len"  # vLLM's flag is the adapter's too
    knob = next((n for n, k in profile.knobs.items() if k.apply == "arg" and k.target == flag), None)
    check_context(profile, argv, flag, f"knobs.{knob} = {knobs.get(knob)}" if knob else "max_model_len")


__all__ = ["KINDS", "EngineKind", "build_launch", "check_launch", "kind_of"]
