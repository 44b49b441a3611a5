"""What a job kind is (`JobKind`, the `Progress` it reads from a run folder) and the registry of kinds.

frank.jobs names no kind: its callers give them (`register`), so the floor below never names a floor above.
The console and the CLI register the four kinds through frank.console.job_kinds; a job process needs no
registry (its module hands its own `KIND` to `launch`, `JobProcess` and `main_run_dir`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from frank.errors import FrankError
from frank.jobs.states import JobEnd


class JobError(FrankError):
    pass


@dataclass(frozen=True)
class Progress:
    """What a run's own files say, read cheaply (no lock, no process check)."""

    done: int = 0
    planned: int | None = None
    ended: JobEnd | Literal["pending"] | None = None  # how the run ended cleanly; pending: it never started
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


_registered: dict[str, JobKind] = {}  # name -> kind, in the order given


def register(*given: JobKind) -> None:
    """Add kinds (idempotent). A second kind under a taken name that runs another module is refused."""
    for k in given:
        known = _registered.get(k.name)
        if known is not None and known.module != k.module:
            raise JobError(f"job kind {k.name!r} is already {known.module}, not {k.module}")
        _registered.setdefault(k.name, k)


def kind(name: str) -> JobKind:
    if name not in _registered:
        raise JobError(f"no job kind {name!r} (kinds: {', '.join(_registered) or 'none registered'})")
    return _registered[name]


def registered() -> list[JobKind]:
    """Every registered kind, in the order they were given."""
    return list(_registered.values())
