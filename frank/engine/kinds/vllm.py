"""vLLM as an engine kind: `python -m vllm.entrypoints.openai.api_server` with the profile's flags. Over
more than one GPU (tensor x pipeline x data parallel) the environment also turns vLLM's symmetric-memory
all-reduce off, and every launch keeps NVLink multicast off (frank.engine.multi_gpu)."""

from __future__ import annotations

import json
from typing import Any

from frank.engine import multi_gpu
from frank.engine.kinds.base import EngineKind, check_model, check_python_module
from frank.engine.profiles import LaunchSpec, Profile, knob_settings, with_flags

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def build_launch(profile: Profile, knobs: dict[str, Any], port: int, control_token: str) -> LaunchSpec:
    settings = knob_settings(profile, knobs)
    spec_config = {**profile.speculative_config, **settings.speculative} if profile.speculative_config else None
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
    argv = with_flags(argv + profile.resolved_extra_args(), settings.flags)
    several = multi_gpu.VLLM_MULTI_GPU_ENV if multi_gpu.vllm_gpu_count(argv) > 1 else {}
    env = {**several, **profile.env, **settings.env, "FRANK_CONTROL_TOKEN": control_token}
    return LaunchSpec(argv=argv, env={**env, **multi_gpu.MULTICAST_OFF_ENV}, host=profile.host, port=port)


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
