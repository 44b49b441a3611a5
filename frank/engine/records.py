"""The engine's state files as frozen records, and their one reader and writer.

The controller writes the start's record (engine.json) and the supervisor's launch spec (engine.spec.json);
the supervisor writes its run (engine.run.json) and the server's exit (engine.exit.json). Both sides read
and write them here, so a field has one name on both.

Standard library only: the supervisor imports this module and must start in a few milliseconds under any
python (frank/engine/supervisor.py).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

from frank import readfile
from frank.errors import FrankError

# The controller's states (EngineController.status): the one set the console, the CLI and the sampler read.
EngineState = Literal["stopped", "starting", "ready", "stopping", "crashed"]
ENGINE_STATES: tuple[EngineState, ...] = get_args(EngineState)
RUNNING_STATES: tuple[EngineState, ...] = ("starting", "ready")  # a server process is up (or coming up)


@dataclass(frozen=True)
class EngineRecord:
    """engine.json: what the controller started (0600: it holds the control token)."""

    profile: str
    kind: str = "vllm"
    api_key: str | None = None  # the bearer key clients send (llama.cpp: the control token)
    knobs: dict[str, Any] = field(default_factory=dict)
    host: str | None = None
    port: int | None = None
    url: str | None = None
    token: str | None = None
    pgid: int | None = None  # the supervisor's, once spawned (it is the group's leader)
    supervisor_pid: int | None = None
    supervisor_create_time: float | None = None  # tells the supervisor from a later process with its pid
    started_at: float | None = None  # wall clock
    ready_s: float | None = None  # start-to-ready seconds, once /health answered
    log_path: str | None = None
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # the launch's (LaunchSpec.notes): shown with the status


@dataclass(frozen=True)
class SupervisorSpec:
    """engine.spec.json: what the supervisor runs and where it writes (frank/engine/supervisor.py)."""

    argv: list[str]
    env: dict[str, str]
    log_path: str
    run_path: str
    exit_path: str
    stop_marker: str


@dataclass(frozen=True)
class RunRecord:
    """engine.run.json: the supervisor's pid (written before anything is spawned), then the server's."""

    supervisor_pid: int
    server_pid: int | None = None
    started_at: float | None = None


@dataclass(frozen=True)
class ExitRecord:
    """engine.exit.json: how the server ended (the supervisor's), or why the controller calls it crashed
    (`reason`: no exit file, the supervisor gone)."""

    returncode: int | None = None
    signal: str | None = None  # the signal's name when a signal ended it
    ended_at: float | None = None
    stop_requested: bool = False  # the stop marker was there: an ordered stop, not a crash
    spawn_error: str | None = None  # the server could not be spawned at all: why
    reason: str | None = None

    def describe(self) -> str:
        """How it ended, in one line: the one wording the CLI, the start's refusal and the console show."""
        if self.spawn_error:
            return f"the server could not be spawned: {self.spawn_error}"
        if self.signal:
            return f"killed by {self.signal}"
        if self.returncode is not None:
            return f"exit code {self.returncode}"
        return self.reason or "exit status unknown"


R = TypeVar("R", EngineRecord, SupervisorSpec, RunRecord, ExitRecord)


def read(path: Path | str, kind: type[R]) -> R | None:
    """The file's record, or None when it is missing, torn or not this record (a torn state file is not
    trusted). Keys this frank does not know are left out: a newer writer's extra field reads."""
    try:
        data = readfile.read_object(path)
    except FrankError:
        return None
    known = {f.name for f in fields(kind)}
    try:
        return kind(**{k: v for k, v in data.items() if k in known})
    except TypeError:  # a required field missing
        return None


def write(path: Path | str, record: EngineRecord | SupervisorSpec | RunRecord | ExitRecord) -> None:
    """Write the record atomically, readable by the user only (its folder is the private state dir)."""
    write_json(path, asdict(record))


def write_json(path: Path | str, payload: dict[str, Any]) -> None:
    """A JSON object, atomically (temp file, fsync, rename), mode 0600: the old file or the new one. On a
    full disk the temp file goes and the error propagates (the old file stays whole)."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(payload, handle, indent=2, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
