"""Follow one run: its status and only the bytes appended to its record files since the last poll (1 Hz)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from frank import jsonl
from frank.jobs.state import JobStatus, find, status_of


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
