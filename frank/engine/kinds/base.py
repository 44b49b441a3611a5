"""What an engine kind is: how a profile becomes a launch, what must exist before it starts, the key its
clients send. The controller and supervisor are the same for every kind (own session, loopback, a token);
readiness is GET /health answering 200 for both servers frank runs."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from frank.engine.profiles import LaunchSpec, Profile, ProfileError


class StartCheck(Protocol):
    """What a kind's check before a start keeps until the engine is ready."""

    notes: tuple[str, ...]  # for the record: what the check found (the split's prediction, or why none)

    def at_ready(self) -> object: ...  # called once the engine answers /health (exl3: records the floor)


@dataclass(frozen=True)
class EngineKind:
    name: str  # a profile's `kind`
    label: str  # as the console and CLI show it
    build_launch: Callable[[Profile, dict[str, Any], int, str], LaunchSpec]
    preflight: Callable[[Profile], None]  # raises ProfileError naming the file and field
    client_api_key: Callable[[Profile, str], str]  # (profile, control token) -> bearer key clients send, or ""
    health_path: str = "/health"
    # How a draw of episodes gets a prompt cache of its own: "cache_salt" (a per-request namespace the
    # server keys its cache on) or "restart" (no such namespace: a fresh engine start per draw)
    fresh_cache: str = "cache_salt"
    # What this kind's server does not report, for an experiment's measures and guards -> why
    lacks: Mapping[str, str] = field(default_factory=dict)
    # Before a start, with the launch built (profile, argv, env, the state dir): what the machine must hold for
    # it (exl3: the split's fit against the GPU's free memory, frank.engine.split_fit). Raises ProfileError to
    # refuse; what it returns gives notes for the record and is called back when the engine is ready.
    check_start: Callable[[Profile, list[str], dict[str, str], Path], StartCheck] | None = None
    # As the engine is stopped, before its processes are signalled (its profile's name, its start's wall clock,
    # its environment, the state dir): exl3 measures the split's floor again, after serving.
    before_stop: Callable[[str, float | None, Mapping[str, str], Path], object] | None = None
    # Said after a start that ran out of GPU memory while loading ({profile}: the profile's name), or ""
    oom_hint: str = ""


def check_model(profile: Profile) -> None:
    model = profile.model_path()
    if (model.startswith("/") or profile.model.startswith("@models/")) and not Path(model).exists():
        name = profile.model.removeprefix("@models/").split("/", 1)[0]
        hint = f" (run `frank model build --model {name}`)" if profile.model.startswith("@models/") else ""
        raise ProfileError(f"{profile.source}: model: {model} does not exist{hint}")


def check_python_module(profile: Profile, module: str, venv_hint: str) -> None:
    """The profile's python exists and can import `module` (probed in a child: never imported here)."""
    python = profile.python_path()
    if not python.exists():
        hint = f" (run `make setup` to build {venv_hint})" if profile.python.startswith("@") else ""
        raise ProfileError(f"{profile.source}: python: {python} does not exist{hint}")
    probe = subprocess.run(
        [str(python), "-c", f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 3)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        why = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else f"no {module} package"
        raise ProfileError(f"{profile.source}: python: {module} is not importable by {python} ({why})")
