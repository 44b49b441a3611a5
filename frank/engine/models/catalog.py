"""The models frank builds, by name: the tiny random models (tiny_model), the DeepSeek-V4-shaped MoEs with
their DSpark drafts (moe_model) and SmolLM2 (smollm2). Each builder module has default_dir(name),
check_build(dir, name) and build_via_engine_venv(out, force, name=)."""

from __future__ import annotations

from types import ModuleType

from frank.engine.models import moe_model, smollm2, tiny_model
from frank.errors import FrankError


def names() -> list[str]:
    return sorted([*tiny_model.MODELS, *moe_model.MODELS, smollm2.MODEL_NAME])


def builder(name: str) -> ModuleType:
    if name == smollm2.MODEL_NAME:
        return smollm2
    if name in tiny_model.MODELS:
        return tiny_model
    if name in moe_model.MODELS:
        return moe_model
    raise FrankError(f"no built-in model {name!r}: expected one of {', '.join(names())}")


def build_version(name: str) -> str:
    if name == smollm2.MODEL_NAME:
        return smollm2.BUILD_VERSION
    if name in moe_model.MODELS:
        return moe_model.spec_for(name).build_version
    return tiny_model.spec_for(name).build_version
