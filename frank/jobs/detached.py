"""Start a job detached (`python -m KIND.module RUN_ID` in its own session), and stop one (SIGTERM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from frank import paths
from frank.jobs.job_file import LOG_FILE, read_job_file, write_job_file
from frank.jobs.kinds import JobError, JobKind
from frank.jobs.state import JobStatus, find, status_of


def launch(k: JobKind, run_dir: Path, env: dict[str, str] | None = None) -> JobStatus:
    """Start `python -m KIND.module RUN_ID` detached (own session, stdin /dev/null, output to job.log);
    returns at once. Refuses a run that some process is working on."""
    current = status_of(k, run_dir)
    if current.state == "running":
        raise JobError(f"{run_dir.name} is already running (pid {current.pid})")
    log = os.open(run_dir / LOG_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    child_env = {**os.environ, **(env or {})}
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(paths.REPO_ROOT), child_env.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", k.module, str(run_dir)],
            cwd=str(paths.REPO_ROOT),
            start_new_session=True,
            close_fds=True,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
    finally:
        os.close(log)
    job = read_job_file(run_dir)
    if job.pid != proc.pid:  # (a fast child may have written its own record already)
        write_job_file(run_dir, k.name, proc.pid, job.spec, job.planned)
    _reap_later(proc)
    return status_of(k, run_dir)


def _reap_later(proc: subprocess.Popen[bytes]) -> None:
    """A long-lived launcher (the console) reaps its detached children so they never linger as zombies."""
    threading.Thread(target=proc.wait, name=f"reap-{proc.pid}", daemon=True).start()


def cancel(run: str, wait_s: float = 0.0) -> JobStatus:
    """SIGTERM to the job process: it stops after the work in flight and records a clean, resumable stop."""
    k, run_dir = find(run)
    st = status_of(k, run_dir)
    if st.state != "running" or not st.pid:
        raise JobError(f"{run_dir.name} is not running (state: {st.state})")
    try:
        os.kill(st.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        st = status_of(k, run_dir)
        if st.state != "running":
            break
        time.sleep(0.2)
    return st
