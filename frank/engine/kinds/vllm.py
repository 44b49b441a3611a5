"""vLLM as an engine kind: `python -m vllm.entrypoints.openai.api_server` with the profile's flags."""

from __future__ import annotations

import json
from typing import Any

from frank.engine.kinds.base import EngineKind, check_model, check_python_module
from frank.engine.profiles import LaunchSpec, Profile, knob_settings, with_flags

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def build_launch(profile: Profile, knobs: dict[str, Any], port: int, control_token: str) -> LaunchSpec:
    settings = knob_settings(profile, knobs)
    spec_config = {**profile.speculative_config, **settings.speculative} if profile.speculative_config else None
    env = {**profile.env, **settings.env, "FRANK_CONTROL_TOKEN": control_token}
    argv = [
        str(profile.python_path()),
        "-m",
        API_SERVER_MODULE,
        "--model",
        profile.model_path(),
        "--served-model-name",
        profile.served_model_name,
        "--host",
        profile.host,
        "--port",
        str(port),
        "--tensor-parallel-size",
        str(profile.tensor_parallel_size),
    ]
    if profile.quantization:
        argv += ["--quantization", profile.quantization]
    if profile.dtype:
        argv += ["--dtype", profile.dtype]
    if profile.max_model_len:
        argv += ["--max-model-len", str(profile.max_model_len)]
    if spec_config:
        argv += ["--speculative-config", json.dumps(spec_config, sort_keys=True, separators=(",", ":"))]
    if profile.api_key:
        argv += ["--api-key", profile.api_key]
    argv += profile.resolved_extra_args()
    return LaunchSpec(argv=with_flags(argv, settings.flags), env=env, host=profile.host, port=port)


def preflight(profile: Profile) -> None:
    check_model(profile)
    check_python_module(profile, "vllm", "the engine venv")


VLLM = EngineKind(
    name="vllm",
    label="vLLM",
    build_launch=build_launch,
    preflight=preflight,
    # the control token guards only frank's own control routes; /v1 takes the profile's key, if any
    client_api_key=lambda profile, token: profile.api_key,
)
