"""The experiment journal: append-only JSON lines, one event per line, flushed and fsynced per event.

Every event carries `seq` (its line number, from 1), `t` (UTC wall clock) and `event`. The journal is the
record: the runner's progress, the console's live view and the report are all read back from it.

A runner killed mid-write leaves at most a torn last line (no newline, or not valid JSON). Readers skip it;
the next writer moves it to `journal.torn` (kept, never silently dropped) and appends after the last whole
event. A damaged line anywhere else is an error naming file:line.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from frank.errors import FrankError


class JournalError(FrankError):
    pass


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def read_events(path: Path) -> list[dict[str, Any]]:
    events, _ = _read(path)
    return events


def _read(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Whole events, and the byte length they occupy (anything after it is a torn tail)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], 0
    events: list[dict[str, Any]] = []
    good = 0
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        last = number == len(lines)
        if last:  # bytes after the final newline: empty, or a torn event
            break
        try:
            event = json.loads(raw)
            if not isinstance(event, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            if number == len(lines) - 1 and lines[-1] == b"":
                # the last newline-terminated line is bad: a torn write that got its newline is impossible
                # with one os.write per event, but tolerate it as torn rather than lose the run
                break
            raise JournalError(f"{path}:{number}: damaged journal line ({exc})") from None
        events.append(event)
        good += len(raw) + 1
    return events, good


class Journal:
    """An open journal for appending. One writer at a time (the runner holds the run's lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        events, good = _read(path)
        self._heal(good)
        self.seq = len(events)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def _heal(self, good: int) -> None:
        if not self.path.exists() or self.path.stat().st_size == good:
            return
        with open(self.path, "rb") as handle:
            handle.seek(good)
            torn = handle.read()
        torn_path = self.path.with_name(self.path.name.replace(".jsonl", "") + ".torn")
        fd = os.open(torn_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(
                fd, json.dumps({"t": _now(), "offset": good, "bytes": torn.decode(errors="replace")}).encode() + b"\n"
            )
            os.fsync(fd)
        finally:
            os.close(fd)
        with open(self.path, "r+b") as handle:
            handle.truncate(good)
            handle.flush()
            os.fsync(handle.fileno())

    def append(self, event: str, **fields: Any) -> dict[str, Any]:
        self.seq += 1
        record = {"seq": self.seq, "t": _now(), "unix": round(time.time(), 3), "event": event, **fields}
        line = json.dumps(record, sort_keys=True, separators=(",", ":"), default=str).encode() + b"\n"
        os.write(self._fd, line)  # one write per event: O_APPEND keeps it whole against other appends
        os.fsync(self._fd)
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
