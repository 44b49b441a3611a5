"""Detached episode runs: `frank episodes run --detach` and the console start the runner in its own session.

The seam for the job layer (issue 10, `replays/jobs.py`): when it is on main, this launches through
`jobs.launch("episodes", folder)` (see replays/episodes/job.py); until then it starts
`frank episodes run --resume FOLDER` itself, the way `frank experiment run --detach` does: own session,
stdin from /dev/null, output appended to the run folder's runner.log, so an SSH drop cannot touch it.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from engine.errors import FrankError
from engine.paths import REPO_ROOT
from replays.experiments.runner import lock_holder


def launch_detached(folder: Path, url: str | None = None) -> int:
    """Start the runner for `folder` in the background; returns its pid."""
    holder = lock_holder(folder / "runner.lock")
    if holder is not None:
        raise FrankError(f"a runner (pid {holder}) is already working on {folder.name}")
    argv = [sys.executable, "-m", "console.cli", "episodes", "run", "--resume", str(folder)]
    if url:
        argv += ["--url", url]
    log = os.open(folder / "runner.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        proc = subprocess.Popen(argv, cwd=str(REPO_ROOT), start_new_session=True, close_fds=True,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    finally:
        os.close(log)
    return proc.pid
