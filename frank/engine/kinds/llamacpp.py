"""llama.cpp as an engine kind: its own C++ HTTP server, either in-process through xllamacpp (CPU wheel,
`python -m frank.engine.xllamacpp_server`, which takes llama-server's flag names) or a `llama-server` binary
(a CUDA build, say). Both get the same flags; the key clients must send is the control token, passed in
LLAMA_API_KEY (llama-server's own variable) so it never shows in the process list. llama.cpp guards every
route with it except /health and /v1/models, /metrics included."""

from __future__ import annotations

import os
from typing import Any

from frank import paths
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
    argv += profile.resolved_extra_args()
    return LaunchSpec(argv=with_flags(argv, settings.flags), env=env, host=profile.host, port=port)


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
