"""The experiment journal: append-only JSON lines, one event per line, flushed and fsynced per event.

Every event carries `seq` (its line number, from 1), `t` (UTC wall clock) and `event`. The journal is the
record: the runner's progress, the console's live view and the report are all read back from it, through
`fold` (below): which attempts each slot had, how each ended, the voided blocks.

A runner killed mid-write leaves at most a torn last line. It is read and healed as every record file is
(frank.jsonl): readers skip it, the next writer moves it to `journal.torn` (kept, never silently dropped)
and appends after the last whole event; a damaged line anywhere else is an error naming file:line.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from frank import jsonl

if TYPE_CHECKING:
    from frank.experiments.fidelity import CellFidelity


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# Every event a journal holds, in the order a run writes them (the registry's, the runner's, a cell's).
JournalEvent = Literal[
    "registered",
    "runner_started",
    "cell_started",
    "engine_ready",
    "replay_done",
    "episodes_done",
    "fidelity_done",
    "fidelity_unavailable",
    "engine_stopped",
    "cell_done",
    "cell_failed",
    "cell_interrupted",
    "block_voided",
    "decided",
    "runner_stopped",
]
JOURNAL_EVENTS: tuple[JournalEvent, ...] = get_args(JournalEvent)


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every whole event; a damaged line before the end raises frank.jsonl.JsonlError naming file:line."""
    return jsonl.read(path)


class Journal:
    """An open journal for appending. One writer at a time (the runner holds the run's lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        jsonl.heal(path)
        self.seq = len(read_events(path))
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def append(self, event: JournalEvent, **fields: Any) -> dict[str, Any]:
        seq = self.seq + 1
        record = {"seq": seq, "t": _now(), "unix": round(time.time(), 3), "event": event, **fields}
        line = json.dumps(record, sort_keys=True, separators=(",", ":"), default=str).encode() + b"\n"
        # one write per event (O_APPEND keeps it whole against other appends), fsynced; on a full disk the
        # part written is cut back and frank.jsonl.WriteError names the file: every event before stays whole
        jsonl.write_whole(self._fd, self.path, line, os.fstat(self._fd).st_size)
        self.seq = seq
        return record

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def follow(path: Path, poll_s: float = 0.5, stop: Any = None) -> Iterator[dict[str, Any]]:
    """Yield events as they are appended (for `status --follow`); `stop()` returning True ends it."""
    seen = 0
    while True:
        events = read_events(path)
        yield from events[seen:]
        seen = len(events)
        if stop is not None and stop():
            return
        time.sleep(poll_s)


CLOSING = ("cell_done", "cell_failed", "cell_interrupted")


@dataclass(frozen=True)
class CellResult:
    """What one cell measured: an executor's result, journaled as the `cell_done` event's fields (beside
    slot, attempt, arm, block and host) and read back from it by `Progress.done`."""

    value: float  # the design's measure for this start
    measure: str = ""
    failed: int | None = None  # failed requests (episodes: errors); None: not recorded
    requests: int | None = None
    prompt_hashes: dict[str, str | None] | None = None  # request -> sha256 of its prompt token IDs
    output_hashes: dict[str, str | None] | None = None
    failures: tuple[str, ...] = ()  # the engine's own words for the first failed requests
    checks: dict[str, bool] | None = None  # an episodes guard's outcome per check
    measures: dict[str, Any] | None = None  # every measure of the start, by name (frank.workloads.record)
    dir: str = ""  # the cell's replay or episodes folder
    fidelity: CellFidelity | None = None
    # the rig while the cell's replay ran (frank.telemetry.rig): {"facts": RigFacts, "conditions": RigConditions}
    rig: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The `cell_done` fields: what was recorded, nothing for what was not (the journal's lines as before)."""
        out: dict[str, Any] = {"value": self.value}
        kept = ("measure", "failed", "requests", "prompt_hashes", "output_hashes", "checks", "measures", "dir", "rig")
        for key in kept:
            value = getattr(self, key)
            if value is not None and value != "":
                out[key] = value
        if self.failures:
            out["failures"] = list(self.failures)
        if self.fidelity is not None:
            out["fidelity"] = self.fidelity
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellResult:
        """A `cell_done` event's result (its other fields, seq, slot, host, ..., are the journal's)."""
        return cls(
            value=data["value"],
            measure=data.get("measure") or "",
            failed=data.get("failed"),
            requests=data.get("requests"),
            prompt_hashes=data.get("prompt_hashes"),
            output_hashes=data.get("output_hashes"),
            failures=tuple(data.get("failures") or ()),
            checks=data.get("checks"),
            measures=data.get("measures"),
            dir=data.get("dir") or "",
            fidelity=data.get("fidelity"),
            rig=data.get("rig"),
        )


@dataclass(frozen=True)
class Attempt:
    slot: int
    attempt: int
    status: str  # running | done | failed | interrupted
    started: dict[str, Any]
    closed: dict[str, Any] | None = None
    phase: str = "starting"  # starting | replaying | stopping | closed

    @property
    def value(self) -> float | None:
        return self.closed.get("value") if self.closed and self.status == "done" else None


@dataclass(frozen=True)
class Progress:
    attempts: dict[int, tuple[Attempt, ...]]
    voided: frozenset[int]
    stopped_reason: str | None  # reason of the last runner_stopped, if the last runner stopped
    runner_sessions: int
    decided: dict[str, Any] | None = None  # the `decided` event of a run that stopped when decided

    def done(self, slot: int) -> CellResult | None:
        for a in self.attempts.get(slot, ()):
            if a.status == "done" and a.closed is not None:
                return CellResult.from_json(a.closed)
        return None

    def failures(self, slot: int) -> int:
        return sum(1 for a in self.attempts.get(slot, ()) if a.status in ("failed", "interrupted"))

    @property
    def open_attempts(self) -> tuple[Attempt, ...]:
        """The attempts started and never closed: in flight, or cut off with their runner (one a host at
        most when a design's blocks run on several hosts side by side)."""
        return tuple(a for attempts in self.attempts.values() for a in attempts if a.status == "running")


def fold(events: Iterable[dict[str, Any]]) -> Progress:
    attempts: dict[int, list[Attempt]] = {}
    voided: set[int] = set()
    stopped: str | None = None
    sessions = 0
    decided: dict[str, Any] | None = None

    def replace_last(slot: int, **changes: Any) -> None:
        items = attempts.get(slot)
        if items and items[-1].status == "running":
            items[-1] = replace(items[-1], **changes)

    for ev in events:
        kind = ev.get("event")
        if kind == "runner_started":
            sessions += 1
            stopped = None
        elif kind == "runner_stopped":
            stopped = ev.get("reason")
        elif kind == "cell_started":
            attempts.setdefault(ev["slot"], []).append(Attempt(ev["slot"], ev["attempt"], "running", ev))
        elif kind == "engine_ready":
            replace_last(ev["slot"], phase="replaying")
        elif kind == "replay_done":
            replace_last(ev["slot"], phase="stopping")
        elif kind in CLOSING:
            status = {"cell_done": "done", "cell_failed": "failed", "cell_interrupted": "interrupted"}[kind]
            replace_last(ev["slot"], status=status, closed=ev, phase="closed")
        elif kind == "block_voided":
            voided.add(int(ev["block"]))
        elif kind == "decided":
            decided = ev
    return Progress(
        attempts={k: tuple(v) for k, v in attempts.items()},
        voided=frozenset(voided),
        stopped_reason=stopped,
        runner_sessions=sessions,
        decided=decided,
    )
