"""Long runs as detached jobs: replays, experiments (and any other kind) outlive the terminal.

A job is one run folder worked on by one process at a time:

- launch: `python -m KIND.module RUN_ID` in its own session (stdin /dev/null, output appended to the run
  folder's job.log), so SIGHUP from a dropped SSH connection and the console's exit never reach it;
- one lock per run: the job process holds an exclusive flock on the run's lock file (the kernel drops it
  when the process dies, even by SIGKILL), so two processes never work on one run;
- records: each kind appends its records through frank.jsonl (fsynced, a torn last line skipped);
- status: running while the lock is held (or the launched pid is still starting); otherwise the state the
  run's own files say it ended in, and `interrupted` when they say nothing (killed, machine down);
- follow: `Follower.poll()` reads the status and only the bytes appended to the run's record files since
  the last poll: cheap enough for 1 Hz;
- cancel: SIGTERM; the job stops cleanly after the work in flight and can be resumed (launch it again).

Kinds are described by a `JobKind` in their own module (KIND_MODULES), imported on first use, so this
module imports none of them. Adding a kind: see docs/jobs.md.
"""

from __future__ import annotations

import fcntl
import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from frank import jsonl, paths
from frank.errors import FrankError

JOB_FILE = "job.json"  # who works on the run: kind, pid (+ process start time), launched_at
LOG_FILE = "job.log"  # a detached job's stdout and stderr
STATES = ("running", "finished", "cancelled", "failed", "interrupted", "pending")  # pending: never started
ENDED = ("finished", "cancelled", "failed")

# kind name -> the module that defines `KIND: JobKind` and `main(argv)` (run as `python -m MODULE RUN_ID`)
KIND_MODULES = {
    "replay": "frank.workloads.replay_job",
    "experiment": "frank.experiments.job",
    "episodes": "frank.episodes.job",
    "fidelity": "frank.fidelity.job",
}


class JobError(FrankError):
    pass


@dataclass(frozen=True)
class Progress:
    """What a run's own files say, read cheaply (no lock, no process check)."""

    done: int = 0
    planned: int | None = None
    ended: str | None = None  # finished | cancelled | failed when the run ended cleanly, pending when it
    # never started, else None
    ended_at: float | None = None  # when the end was recorded (time.time()); an end older than the latest
    # process start belongs to an earlier attempt (None: trust it)
    detail: str = ""  # one line for humans (current draw, error, ...)
    parts: dict[str, tuple[int, int]] = field(default_factory=dict)  # e.g. draw -> (done, planned)
    extra: dict[str, Any] = field(default_factory=dict)  # the kind's own figures (per-draw totals)


@dataclass(frozen=True)
class JobKind:
    name: str  # replay | experiment | episodes ...
    module: str  # `python -m module RUN_ID` runs or resumes one run
    root: Callable[[], Path]  # the folder holding this kind's run folders
    progress: Callable[[Path], Progress]  # read a run folder (must be cheap: polled at 1 Hz)
    is_run: Callable[[Path], bool]  # a folder under root is one of this kind's runs
    record_files: Callable[[Path], list[Path]] = lambda run_dir: []  # JSONL files Follower tails
    lock_name: str = "job.lock"


@dataclass(frozen=True)
class JobStatus:
    run_id: str
    kind: str
    state: str  # one of STATES
    done: int
    planned: int | None
    pid: int | None  # the job process while running
    run_dir: str
    detail: str = ""
    parts: dict[str, tuple[int, int]] = field(default_factory=dict)
    log: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# -- kinds ----------------------------------------------------------------------------------------------

_kinds: dict[str, JobKind] = {}


def kind(name: str) -> JobKind:
    if name not in _kinds:
        if name not in KIND_MODULES:
            raise JobError(f"no job kind {name!r} (kinds: {', '.join(KIND_MODULES)})")
        _kinds[name] = importlib.import_module(KIND_MODULES[name]).KIND
    return _kinds[name]


def kinds() -> list[JobKind]:
    return [kind(name) for name in KIND_MODULES]


def find(run: str | Path) -> tuple[JobKind, Path]:
    """The kind and folder of a run id (or a run folder's path)."""
    candidate = Path(run).expanduser()
    if candidate.is_dir() and len(candidate.parts) > 1:
        named = read_job_file(candidate).get("kind")
        for k in [kind(named)] if named in KIND_MODULES else kinds():
            if k.is_run(candidate):
                return k, candidate
    for k in kinds():
        folder = k.root() / str(run)
        if folder.is_dir() and k.is_run(folder):
            return k, folder
    raise JobError(f"no run {str(run)!r} (`frank jobs list` shows them)")


# -- the lock -------------------------------------------------------------------------------------------


class RunLock:
    """An exclusive flock on the run's lock file, holding the holder's pid; the kernel drops it when the
    holder dies, even by SIGKILL."""

    def __init__(self, path: Path, what: str = "run") -> None:
        self.path = path
        self.what = what
        self.fd = -1

    def acquire(self) -> RunLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise self.refused(lock_holder(self.path)) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.fsync(fd)
        self.fd = fd
        return self

    def refused(self, holder: int | None) -> Exception:
        return JobError(
            f"another process (pid {holder or '?'}) is running {self.what} {self.path.parent.name}; "
            f"follow it with `frank jobs status {self.path.parent.name}`"
        )

    def release(self) -> None:
        if self.fd >= 0:
            os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_holder(path: Path) -> int | None:
    """The pid of the live process holding the lock (-1 when unknown), or None when nobody holds it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode(errors="replace").strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


# -- the job file -----------------------------------------------------------------------------------------


def _process_start(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def write_job_file(run_dir: Path, kind_name: str, pid: int | None, **extra: Any) -> dict[str, Any]:
    record = {
        "run_id": run_dir.name,
        "kind": kind_name,
        "pid": pid,
        "pid_started": _process_start(pid) if pid else None,
        "launched_at": time.time(),
        **extra,
    }
    paths.write_private(run_dir / JOB_FILE, json.dumps(record, indent=2, default=str) + "\n")
    return record


def _carried(job: dict[str, Any]) -> dict[str, Any]:
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


def _launched_and_alive(job: dict[str, Any]) -> int | None:
    """The pid of a launched job process that has not taken its lock yet (or just released it)."""
    pid, started = job.get("pid"), job.get("pid_started")
    if not isinstance(pid, int) or started is None:
        return None
    now = _process_start(pid)
    if now is None or abs(now - float(started)) > 0.01:
        return None  # gone, or the pid was reused
    try:
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.NoSuchProcess:
        return None
    return pid


# -- status, list -----------------------------------------------------------------------------------------


def status_of(k: JobKind, run_dir: Path) -> JobStatus:
    holder = lock_holder(run_dir / k.lock_name)
    job = read_job_file(run_dir)
    pid = holder if holder is not None else _launched_and_alive(job)
    progress = k.progress(run_dir)
    started = float(job.get("launched_at") or 0.0)  # the latest process's start (each one rewrites it)
    if pid is not None:
        state = "running"
    elif job.get("ended") in ENDED and job.get("pid") == job.get("ended_pid"):
        state = job["ended"]  # the latest process recorded its end (it failed before the kind's files said so)
    elif progress.ended in (*ENDED, "pending") and (progress.ended_at is None or progress.ended_at >= started):
        state = progress.ended
    else:
        state = "interrupted"  # the process is gone and the run's files record no clean end
    planned = progress.planned if progress.planned is not None else job.get("planned")
    log = run_dir / LOG_FILE
    return JobStatus(
        run_id=run_dir.name,
        kind=k.name,
        state=state,
        done=progress.done,
        planned=planned,
        pid=pid if pid and pid > 0 else None,
        run_dir=str(run_dir),
        detail=progress.detail,
        parts=dict(progress.parts),
        log=str(log) if log.exists() else "",
        extra=progress.extra,
    )


def status(run: str) -> JobStatus:
    k, run_dir = find(run)
    return status_of(k, run_dir)


def run_dirs(k: JobKind) -> list[Path]:
    root = k.root()
    if not root.is_dir():
        return []
    return sorted((d for d in root.iterdir() if d.is_dir() and k.is_run(d)), key=lambda d: d.name, reverse=True)


def list_jobs(running_only: bool = False, pending: bool = False, of: tuple[str, ...] | None = None) -> list[JobStatus]:
    """Every run of every kind, newest first (with `running_only`, only the runs whose lock is held or
    whose launched process is alive: a lock check per run, the run's files read only for those; `pending`
    adds the runs that were never started, such as a registered experiment; `of`: only these kinds)."""
    out = []
    for k in kinds() if of is None else [kind(name) for name in of]:
        for run_dir in run_dirs(k):
            if (
                running_only
                and lock_holder(run_dir / k.lock_name) is None
                and _launched_and_alive(read_job_file(run_dir)) is None
            ):
                continue
            st = status_of(k, run_dir)
            if st.state != "pending" or pending:
                out.append(st)
    return sorted(out, key=lambda s: s.run_id, reverse=True)


# -- launch, cancel ---------------------------------------------------------------------------------------


def launch(kind_name: str, run_dir: Path, env: dict[str, str] | None = None, **job_fields: Any) -> JobStatus:
    """Start `python -m KIND.module RUN_ID` detached (own session, stdin /dev/null, output to job.log);
    returns at once. Refuses a run that some process is working on."""
    k = kind(kind_name)
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
    if job.get("pid") != proc.pid:  # (a fast child may have written its own record already)
        write_job_file(run_dir, k.name, proc.pid, **{**_carried(job), **job_fields})
    _reap_later(proc)
    return status_of(k, run_dir)


def _reap_later(proc: subprocess.Popen) -> None:
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


# -- inside the job process -------------------------------------------------------------------------------


class JobProcess:
    """What a job's main does first: hold the run's lock, record its pid, ignore SIGHUP, and turn SIGTERM
    and SIGINT into `cancelled` (set) plus `on_cancel()` so the work stops cleanly after what is in flight."""

    def __init__(self, kind_name: str, run_dir: Path, on_cancel: Callable[[], None] | None = None) -> None:
        self.kind = kind(kind_name)
        self.run_dir = run_dir
        self.on_cancel = on_cancel
        self.cancelled = threading.Event()
        self._lock = RunLock(run_dir / self.kind.lock_name, self.kind.name)
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> JobProcess:
        self._lock.acquire()
        job = read_job_file(self.run_dir)
        write_job_file(self.run_dir, self.kind.name, os.getpid(), **_carried(job))
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
            job.update(ended="failed", ended_pid=os.getpid(), error=f"{type(exc).__name__}: {exc}")
            paths.write_private(self.run_dir / JOB_FILE, json.dumps(job, indent=2, default=str) + "\n")
        self._lock.release()


# -- follow -------------------------------------------------------------------------------------------------


class Follower:
    """Follow one run: each poll() gives its status and the whole records appended to its record files
    since the previous poll (frank.jsonl: a torn last line waits for its end, a damaged line raises)."""

    def __init__(self, run: str, backlog: int = 200) -> None:
        self.kind, self.run_dir = find(run)
        self.run_id = self.run_dir.name
        self.backlog = backlog
        self._offsets: dict[Path, tuple[int, int]] = {}  # path -> (bytes read, number of the next line)

    def poll(self) -> tuple[JobStatus, list[dict[str, Any]]]:
        st = status_of(self.kind, self.run_dir)
        records: list[dict[str, Any]] = []
        for path in self.kind.record_files(self.run_dir):
            records.extend(self._new_records(path))
        return st, records[-self.backlog :]

    def _new_records(self, path: Path) -> list[dict[str, Any]]:
        offset, line = self._offsets.get(path, (0, 1))
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return []
        if size < offset:  # rewritten from scratch
            offset, line = 0, 1
        if size == offset:
            return []
        with open(path, "rb") as handle:
            if offset == 0 and size > 1 << 20:  # a big file on first sight: only its tail
                handle.seek(size - (1 << 20))
                handle.readline()
                offset = handle.tell()
                line = 1 + _count_newlines(path, offset)
            handle.seek(offset)
            data = handle.read(size - offset)
        records, whole = jsonl.parse(data, path, line)  # a torn last line waits for its end
        self._offsets[path] = (offset + whole, line + data.count(b"\n", 0, whole))
        return records


def _count_newlines(path: Path, end: int) -> int:
    count = 0
    with open(path, "rb") as handle:
        while handle.tell() < end:
            count += handle.read(min(1 << 20, end - handle.tell())).count(b"\n")
    return count


def main_run_dir(argv: list[str] | None, kind_name: str) -> Path:
    """The run folder a job module was started for (`python -m MODULE RUN_ID_OR_FOLDER`)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit(f"usage: python -m {kind(kind_name).module} RUN_ID")
    k, run_dir = find(args[0])
    if k.name != kind_name:
        raise SystemExit(f"{args[0]} is a {k.name} run, not a {kind_name} run")
    return run_dir
