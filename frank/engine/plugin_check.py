"""frank's vLLM plugins checked against the engine venv's vLLM, from outside it: the engine venv's Python runs
frank.plugins.verified (each part's verified versions, and whether that vLLM's code is one of theirs)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from frank import paths
from frank.errors import FrankError

TIMEOUT_S = 120


def check_engine_vllm(python: Path | None = None) -> list[dict[str, Any]]:
    """One verdict per part (frank.plugins.compat.Verdict.to_json, plus `found`), read in the engine venv."""
    python = python or paths.engine_venv_python()
    if not python.exists():
        raise FrankError(f"no engine venv at {python} (make setup, or set FRANK_ENGINE_PYTHON)")
    # this checkout first, then whatever else the engine's Python is given (an offline --target install)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(paths.REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    try:
        proc = subprocess.run(
            [str(python), "-m", "frank.plugins.verified"], capture_output=True, text=True, env=env, timeout=TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise FrankError(f"{python} -m frank.plugins.verified: no answer in {TIMEOUT_S} s") from None
    if proc.returncode != 0:
        raise FrankError(f"{python} -m frank.plugins.verified failed: {proc.stderr.strip()[-500:]}")
    value: list[dict[str, Any]] = json.loads(proc.stdout)
    return value
