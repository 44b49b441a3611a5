"""exllamav3 as an engine kind: frank's thin HTTP adapter over exllamav3's own generator
(`python -m frank.engine.exl3.server`, frank.engine.exl3), run by a python that has torch and exllamav3 (the
profile's `python`, "@env:FRANK_EXL3_PYTHON" on the GPU machine). The adapter imports only the standard
library, prometheus_client and exllamav3, so this checkout goes on PYTHONPATH as for llama.cpp's launcher.

The CPU-expert settings are exllamav3's own environment variables (EXL3_MOE_*), read when exllamav3 is
imported and when the model's config is read: a profile sets them in `env` and by env knobs. The key every
route but /health takes is the control token, passed in FRANK_CONTROL_TOKEN (never in the process list)."""

from __future__ import annotations

from typing import Any

from frank import paths
from frank.engine import multi_gpu
from frank.engine.kinds.base import EngineKind, check_model, check_python_module
from frank.engine.profiles import LaunchSpec, Profile, knob_settings, with_flags

SERVER_MODULE = "frank.engine.exl3.server"
TOKEN_ENV = "FRANK_CONTROL_TOKEN"


def build_launch(profile: Profile, knobs: dict[str, Any], port: int, control_token: str) -> LaunchSpec:
    settings = knob_settings(profile, knobs)
    argv = [
        str(profile.python_path()),
        "-m",
        SERVER_MODULE,
        "--model",
        profile.model_path(),
        "--served-model-name",
        profile.served_model_name,
        "--host",
        profile.host,
        "--port",
        str(port),
    ]
    if profile.max_model_len:
        argv += ["--max-model-len", str(profile.max_model_len)]
    argv = with_flags(argv + profile.resolved_extra_args(), settings.flags)
    env = {
        **profile.env,
        **settings.env,
        TOKEN_ENV: profile.api_key or control_token,
        "PYTHONPATH": str(paths.REPO_ROOT),
    }
    return LaunchSpec(argv=argv, env={**env, **multi_gpu.MULTICAST_OFF_ENV}, host=profile.host, port=port)


def preflight(profile: Profile) -> None:
    check_model(profile)
    check_python_module(profile, "exllamav3", "exllamav3 (scripts/device_exl3.sh installs it on the GPU machine)")


EXL3 = EngineKind(
    name="exl3",
    label="exllamav3",
    build_launch=build_launch,
    preflight=preflight,
    client_api_key=lambda profile, token: profile.api_key or token,
    # exllamav3's page cache serves every request alike (no per-request namespace): a fresh start is exact.
    fresh_cache="restart",
    lacks={
        "front_end_s": "the adapter's prefill time starts when the generator takes the job: no separate front end",
    },
)
