"""exllamav3 as an engine kind: frank's thin HTTP adapter over exllamav3's own generator
(`python -m frank.engine.exl3.server`, frank.engine.exl3), run by a python that has torch and exllamav3 (the
profile's `python`, "@env:FRANK_EXL3_PYTHON" on the GPU machine). The adapter imports only the standard
library, prometheus_client and exllamav3, so this checkout goes on PYTHONPATH as for llama.cpp's launcher.

The CPU-expert settings are exllamav3's own environment variables (EXL3_MOE_*), read when exllamav3 is
imported and when the model's config is read: a profile sets them in `env` and by env knobs. The key every
route but /health takes is the control token, passed in FRANK_CONTROL_TOKEN (never in the process list)."""

from __future__ import annotations

import os
import subprocess
from typing import Any

from frank import paths
from frank.engine import cpu_pool, multi_gpu, split_fit
from frank.engine.kinds.base import EngineKind, check_model, check_python_module
from frank.engine.profiles import LaunchSpec, Profile, ProfileError, knob_settings, with_flags

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
    env, notes = resolve_threads(env)
    return LaunchSpec(argv=argv, env={**env, **multi_gpu.MULTICAST_OFF_ENV}, host=profile.host, port=port, notes=notes)


def resolve_threads(env: dict[str, str]) -> tuple[dict[str, str], tuple[str, ...]]:
    """EXL3_MOE_CPU_THREADS=auto resolved here, on the machine that starts the engine, to exllamav3's own
    default (frank.engine.cpu_pool), written out so the record and the dry run show the number; a count that
    leaves the host process no core is named."""
    value = env.get(cpu_pool.THREADS_ENV)
    if value is None:
        return env, ()
    notes: list[str] = []
    if value == cpu_pool.AUTO:
        threads, how = cpu_pool.exl3_default_threads(env)
        env = {**env, cpu_pool.THREADS_ENV: str(threads)}
        notes.append(f"cpu_threads auto = {threads}: {how}")
    elif value.isdigit():
        threads = int(value)
    else:
        return env, ()
    starved = cpu_pool.leaves_host_no_core(threads)
    return env, tuple(notes + ([starved] if starved else []))


def preflight(profile: Profile) -> None:
    check_model(profile)
    check_python_module(profile, "exllamav3", "exllamav3 (scripts/device_exl3.sh installs it on the GPU machine)")
    check_extension(profile)


def check_extension(profile: Profile) -> None:
    """exllamav3's built extension, checked in the profile's python before the start: one with libstdc++ linked
    in statically crashes in the CPU pool (frank.engine.exl3.ext_check). Not built yet: the server checks it
    after its first import compiles it."""
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT), **profile.env}
    done = subprocess.run(
        [str(profile.python_path()), "-m", "frank.engine.exl3.ext_check"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        raise ProfileError(f"{profile.source}: python: {why}")


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
    # the split's fit: a split predicted not to fit the free GPU memory is refused, and each ready start records
    # the floor it measured, again as it is stopped (frank.engine.split_fit, docs/exl3.md "The split's fit")
    check_start=split_fit.check_start,
    before_stop=split_fit.floor_at_stop,
    oom_hint="`frank engine fit --profile {profile}` gives the smallest cpu_split that fits the GPU's free memory",
)
