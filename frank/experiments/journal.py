"""The experiment journal: append-only JSON lines, one event per line, flushed and fsynced per event.

Every event carries `seq` (its line number, from 1), `t` (UTC wall clock) and `event`. The journal is the
record: the runner's progress, the console's live view and the report are all read back from it.

A runner killed mid-write leaves at most a torn last line. It is read and healed as every record file is
(frank.jsonl): readers skip it, the next writer moves it to `journal.torn` (kept, never silently dropped)
and appends after the last whole event; a damaged line anywhere else is an error naming file:line.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from frank import jsonl


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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
