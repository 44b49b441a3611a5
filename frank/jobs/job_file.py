"""The run folder's job.json: who works on the run (kind, pid and the process's start time, launched_at)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psutil

from frank import paths

JOB_FILE = "job.json"  # who works on the run: kind, pid (+ process start time), launched_at
LOG_FILE = "job.log"  # a detached job's stdout and stderr


def process_start(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def write_job_file(run_dir: Path, kind_name: str, pid: int | None, **extra: Any) -> dict[str, Any]:
    record = {
        "run_id": run_dir.name,
        "kind": kind_name,
        "pid": pid,
        "pid_started": process_start(pid) if pid else None,
        "launched_at": time.time(),
        **extra,
    }
    rewrite_job_file(run_dir, record)
    return record


def rewrite_job_file(run_dir: Path, job: dict[str, Any]) -> None:
    paths.write_private(run_dir / JOB_FILE, json.dumps(job, indent=2, default=str) + "\n")


def carried(job: dict[str, Any]) -> dict[str, Any]:
    """The fields of a job file that a new process on the same run keeps (its spec, planned count)."""
    return {
        k: v
        for k, v in job.items()
        if k not in ("run_id", "kind", "pid", "pid_started", "launched_at", "ended", "ended_pid", "error")
    }


def read_job_file(run_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((run_dir / JOB_FILE).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def launched_and_alive(job: dict[str, Any]) -> int | None:
    """The pid of a launched job process that has not taken its lock yet (or just released it)."""
    pid, started = job.get("pid"), job.get("pid_started")
    if not isinstance(pid, int) or started is None:
        return None
    now = process_start(pid)
    if now is None or abs(now - float(started)) > 0.01:
        return None  # gone, or the pid was reused
    try:
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.NoSuchProcess:
        return None
    return pid
