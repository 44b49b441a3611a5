"""The run folder's job.json: who works on the run (kind, pid and the process's start time, launched_at)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import psutil

from frank import paths, readfile
from frank.errors import FrankError
from frank.jobs.states import JobEnd

JOB_FILE = "job.json"  # who works on the run: kind, pid (+ process start time), launched_at
LOG_FILE = "job.log"  # a detached job's stdout and stderr


def process_start(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


@dataclass(frozen=True)
class JobFile:
    """job.json: who works on the run, and what a new process on the same run keeps (spec, planned)."""

    run_id: str = ""
    kind: str = ""
    pid: int | None = None
    pid_started: float | None = None  # the process's start time: tells it from a later one with its pid
    launched_at: float | None = None  # the latest process's start (each one rewrites the file)
    spec: dict[str, Any] | None = None  # what the kind needs to run it again (a replay's workload, options)
    planned: int | None = None
    ended: JobEnd | None = None  # the end the process recorded itself (it failed before its kind's files said)
    ended_pid: int | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None or k in _ALWAYS}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobFile:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


_ALWAYS = {"run_id", "kind", "pid", "pid_started", "launched_at"}


def write_job_file(
    run_dir: Path, kind_name: str, pid: int | None, spec: dict[str, Any] | None = None, planned: int | None = None
) -> JobFile:
    """A new process on the run (or its launch): the file names it; the spec and planned count go with it."""
    job = JobFile(run_dir.name, kind_name, pid, process_start(pid) if pid else None, time.time(), spec, planned)
    rewrite_job_file(run_dir, job)
    return job


def rewrite_job_file(run_dir: Path, job: JobFile) -> None:
    paths.write_private(run_dir / JOB_FILE, json.dumps(job.to_json(), indent=2, default=str) + "\n")


def read_job_file(run_dir: Path) -> JobFile:
    """The run's job file; an empty JobFile when it is missing or unreadable."""
    try:
        return JobFile.from_json(readfile.read_object(run_dir / JOB_FILE))
    except FrankError:
        return JobFile()


def launched_and_alive(job: JobFile) -> int | None:
    """The pid of a launched job process that has not taken its lock yet (or just released it)."""
    pid, started = job.pid, job.pid_started
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
