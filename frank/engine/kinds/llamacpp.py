"""llama.cpp as an engine kind: its own C++ HTTP server, either in-process through xllamacpp (CPU wheel,
`python -m frank.engine.xllamacpp_server`, which takes llama-server's flag names) or a `llama-server` binary
(a CUDA build, say). Both get the same flags; the key clients must send is the control token, passed in
LLAMA_API_KEY (llama-server's own variable) so it never shows in the process list. llama.cpp guards every
route with it except /health and /v1/models, /metrics included. Under a layer split over more than one GPU,
`--n-cpu-moe N` becomes the same count of CPU-expert layers taken from every GPU's share
(frank.engine.multi_gpu, the model's layer count read from its GGUF); every launch keeps NVLink multicast off."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from frank import paths
from frank.engine import multi_gpu
from frank.engine.kinds.base import EngineKind, check_model, check_python_module
from frank.engine.profiles import LaunchSpec, Profile, ProfileError, knob_settings, with_flags

SERVER_MODULE = "frank.engine.xllamacpp_server"
API_KEY_ENV = "LLAMA_API_KEY"


def build_launch(profile: Profile, knobs: dict[str, Any], port: int, control_token: str) -> LaunchSpec:
    settings = knob_settings(profile, knobs)
    env = {**profile.env, **settings.env, API_KEY_ENV: profile.api_key or control_token}
    if profile.binary:
        head = [str(profile.binary_path())]
    else:  # the launcher comes from this checkout: the llama.cpp venv has only xllamacpp
        head = [str(profile.python_path()), "-m", SERVER_MODULE]
        env["PYTHONPATH"] = str(paths.REPO_ROOT)
    argv = head + [
        "--model",
        profile.model_path(),
        "--alias",
        profile.served_model_name,
        "--host",
        profile.host,
        "--port",
        str(port),
        "--metrics",
        "--jinja",
    ]
    if profile.max_model_len:
        argv += ["--ctx-size", str(profile.max_model_len)]
    argv = _balanced(profile, with_flags(argv + profile.resolved_extra_args(), settings.flags))
    return LaunchSpec(argv=argv, env={**env, **multi_gpu.MULTICAST_OFF_ENV}, host=profile.host, port=port)


def _balanced(profile: Profile, argv: list[str]) -> list[str]:
    """argv with the CPU-expert layers balanced over the GPUs of a layer split (multi_gpu.balance_cpu_moe)."""
    if not multi_gpu.needs_layer_count(argv):
        return argv
    from frank.engine.model_facts import gguf_block_count

    model = profile.model_path()
    layers = gguf_block_count(Path(model))
    if layers is None:
        raise ProfileError(
            f"{profile.source}: model: {model} is not a GGUF that gives its layer count (ARCH.block_count), which "
            "balancing --n-cpu-moe over the GPUs of --tensor-split needs"
        )
    try:
        return multi_gpu.balance_cpu_moe(argv, layers)
    except multi_gpu.SplitError as exc:
        raise ProfileError(f"{profile.source}: {exc}") from None


def preflight(profile: Profile) -> None:
    check_model(profile)
    if not profile.binary:
        check_python_module(profile, "xllamacpp", "the llama.cpp venv")
        return
    binary = profile.binary_path()
    if not binary.is_file() or not os.access(binary, os.X_OK):
        raise ProfileError(f"{profile.source}: binary: {binary} is not an executable file")


LLAMACPP = EngineKind(
    name="llamacpp",
    label="llama.cpp",
    build_launch=build_launch,
    preflight=preflight,
    client_api_key=lambda profile, token: profile.api_key or token,
    # A slot's KV cache and the server's RAM prompt cache serve every request alike (a `cache_salt` is
    # ignored), and erasing a slot needs --slot-save-path and leaves the RAM cache: a fresh start is exact.
    fresh_cache="restart",
    lacks={
        "prompt_token_ids": "llama.cpp's server does not return a request's prompt token IDs",
        "front_end_s": "llama.cpp reports no queue time, so front-end time (TTFT - queue - prefill) is not known",
    },
)
