"""Inside the job process: the run it was started for, its lock, its signals, and a failure recorded."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from frank.jobs.job_file import read_job_file, rewrite_job_file, write_job_file
from frank.jobs.kinds import JobError, JobKind
from frank.jobs.lock import RunLock
from frank.jobs.state import find_in


class JobProcess:
    """What a job's main does first: hold the run's lock, record its pid, ignore SIGHUP, and turn SIGTERM
    and SIGINT into `cancelled` (set) plus `on_cancel()` so the work stops cleanly after what is in flight."""

    def __init__(self, kind: JobKind, run_dir: Path, on_cancel: Callable[[], None] | None = None) -> None:
        self.kind = kind
        self.run_dir = run_dir
        self.on_cancel = on_cancel
        self.cancelled = threading.Event()
        self._lock = RunLock(run_dir / kind.lock_name, kind.name)
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> JobProcess:
        self._lock.acquire()
        job = read_job_file(self.run_dir)
        write_job_file(self.run_dir, self.kind.name, os.getpid(), job.spec, job.planned)
        if threading.current_thread() is threading.main_thread():
            self._previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, signal.SIG_IGN)
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._cancel)
        return self

    def _cancel(self, signum: int, _frame: Any) -> None:
        self.cancelled.set()
        if self.on_cancel is not None:
            self.on_cancel()

    def __exit__(self, exc_type: type | None, exc: BaseException | None, _tb: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        if exc is not None:  # record the end before the lock goes, so no reader ever sees "interrupted"
            job = read_job_file(self.run_dir)
            error = f"{type(exc).__name__}: {exc}"
            rewrite_job_file(self.run_dir, replace(job, ended="failed", ended_pid=os.getpid(), error=error))
        self._lock.release()


def main_run_dir(argv: list[str] | None, kind: JobKind) -> Path:
    """The run folder a job module was started for (`python -m MODULE RUN_ID_OR_FOLDER`): one of `kind`'s
    runs (a folder whose job file names another kind is refused)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit(f"usage: python -m {kind.module} RUN_ID")
    folder = Path(args[0]).expanduser()
    named = read_job_file(folder).kind or None if folder.is_dir() and len(folder.parts) > 1 else None
    if named not in (None, kind.name):
        raise SystemExit(f"{args[0]} is a {named} run, not a {kind.name} run")
    try:
        return find_in([kind], args[0])[1]
    except JobError:
        raise SystemExit(f"no {kind.name} run {args[0]!r} (`frank jobs list` shows them)") from None
