"""A run's state, and the runs of every kind: running while the lock is held (or the launched process is still
starting); otherwise the end the run's own files (or the job file) record; otherwise `interrupted`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from frank.jobs.job_file import LOG_FILE, launched_and_alive, read_job_file
from frank.jobs.kinds import JobError, JobKind, kind, registered
from frank.jobs.lock import lock_holder
from frank.jobs.states import JOB_ENDS, JOB_STATES, JobState

STATES = JOB_STATES
ENDED = JOB_ENDS


@dataclass(frozen=True)
class JobStatus:
    run_id: str
    kind: str
    state: JobState
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


def find_in(candidates: Sequence[JobKind], run: str | Path) -> tuple[JobKind, Path]:
    """The kind (one of `candidates`) and folder of a run id or a run folder's path."""
    candidate = Path(run).expanduser()
    if candidate.is_dir() and len(candidate.parts) > 1:
        named = read_job_file(candidate).kind or None
        by_name = {k.name: k for k in candidates}
        for k in [by_name[named]] if named in by_name else candidates:
            if k.is_run(candidate):
                return k, candidate
    for k in candidates:
        folder = k.root() / str(run)
        if folder.is_dir() and k.is_run(folder):
            return k, folder
    raise JobError(f"no run {str(run)!r} (`frank jobs list` shows them)")


def find(run: str | Path) -> tuple[JobKind, Path]:
    """The kind (of the registered ones) and folder of a run id or a run folder's path."""
    return find_in(registered(), run)


def status_of(k: JobKind, run_dir: Path) -> JobStatus:
    holder = lock_holder(run_dir / k.lock_name)
    job = read_job_file(run_dir)
    pid = holder if holder is not None else launched_and_alive(job)
    progress = k.progress(run_dir)
    started = job.launched_at or 0.0  # the latest process's start (each one rewrites it)
    recorded = job.ended
    state: JobState
    if pid is not None:
        state = "running"
    elif recorded is not None and job.pid == job.ended_pid:
        state = recorded  # the latest process recorded its end (it failed before the kind's files said so)
    elif progress.ended is not None and (progress.ended_at is None or progress.ended_at >= started):
        state = progress.ended
    else:
        state = "interrupted"  # the process is gone and the run's files record no clean end
    planned = progress.planned if progress.planned is not None else job.planned
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
    """Every run of every registered kind, newest first (with `running_only`, only the runs whose lock is
    held or whose launched process is alive: a lock check per run, the run's files read only for those;
    `pending` adds the runs that were never started, such as a registered experiment; `of`: only these kinds)."""
    out = []
    for k in registered() if of is None else [kind(name) for name in of]:
        for run_dir in run_dirs(k):
            if (
                running_only
                and lock_holder(run_dir / k.lock_name) is None
                and launched_and_alive(read_job_file(run_dir)) is None
            ):
                continue
            st = status_of(k, run_dir)
            if st.state != "pending" or pending:
                out.append(st)
    return sorted(out, key=lambda s: s.run_id, reverse=True)
