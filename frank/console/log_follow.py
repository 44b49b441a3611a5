"""The engine log's last lines for the dashboard, read incrementally: stat the file, read only the bytes
appended since the last call (the whole tail only on the first read, a rotation or a truncation).

Plain Python, no Textual: the engine source (frank.console.sources.engine) calls `lines()` in its thread.
"""

from __future__ import annotations

import os
import re
from collections import deque
from pathlib import Path

FIRST_READ_BYTES = 32768  # how far back the first read (or a re-read after rotation) looks
MAX_READ_BYTES = 1 << 20  # a burst of more than this is skipped to its last MiB
POLL_LINE = re.compile(r'"GET /(metrics|health) HTTP')
# Where a clean stop begins in the log (vLLM 0.32's "[shutdown]" lines on SIGTERM, or uvicorn's own) and
# where the supervisor says how the server ended (frank.engine.supervisor): what lies between is vLLM's exit
# chatter (force-killed workers, nanobind's and multiprocessing's leak reports), no error of a clean stop.
SHUTDOWN_BEGINS = re.compile(r"\[shutdown\]|\bShutting down\b|Waiting for application shutdown")
SERVER_EXITED = re.compile(r"^\[frank\] .* server exited: ")
FOLD_SPARE = 60  # lines kept beyond a tail's count, so a folded tail still has its count to show


def fold_shutdown(lines: tuple[str, ...] | list[str]) -> tuple[tuple[str, ...], int]:
    """The log tail of a cleanly stopped engine without what follows the shutdown's first line, but for the
    supervisor's "server exited" line (last: a straggler of the group killed after it is chatter too);
    returns (lines, how many were left out). A tail without both lines is returned as it is."""
    lines = tuple(lines)
    end = next((i for i in range(len(lines) - 1, -1, -1) if SERVER_EXITED.search(lines[i])), None)
    if end is None:
        return lines, 0
    begin = next((i for i in range(end) if SHUTDOWN_BEGINS.search(lines[i])), None)
    if begin is None:
        return lines, 0
    kept = (*lines[: begin + 1], lines[end])
    return kept, len(lines) - len(kept)


class LogFollower:
    """Keeps the last `count` lines of a growing file that are not our own /metrics or /health polls."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._path: str | None = None
        self._key: tuple[int, int] | None = None  # (device, inode) of the file we follow
        self._offset = 0
        self._partial = b""  # a last line still waiting for its newline
        self._lines: deque[str] = deque(maxlen=max(1, count))

    def lines(self, path: str | Path) -> list[str]:
        path = str(path)
        try:
            st = os.stat(path)
        except OSError:
            self._restart(path)
            return []
        key = (st.st_dev, st.st_ino)
        if path != self._path or key != self._key or st.st_size < self._offset:
            self._restart(path)
            self._key = key
            self._offset = max(0, st.st_size - FIRST_READ_BYTES)
            skip_first = self._offset > 0  # the first read starts mid-line
        else:
            skip_first = False
        if st.st_size > self._offset:
            start = max(self._offset, st.st_size - MAX_READ_BYTES)
            try:
                with open(path, "rb") as handle:
                    handle.seek(start)
                    data = handle.read(st.st_size - start)
            except OSError:
                return list(self._lines)
            if start != self._offset:
                self._partial, skip_first = b"", True
            self._offset = start + len(data)
            self._take(self._partial + data, skip_first)
        return list(self._lines)

    def _restart(self, path: str) -> None:
        self._path, self._key, self._offset, self._partial = path, None, 0, b""
        self._lines.clear()

    def _take(self, data: bytes, skip_first: bool) -> None:
        *complete, self._partial = data.split(b"\n")
        if skip_first and complete:
            complete = complete[1:]
        for raw in complete:
            line = raw.decode("utf-8", "replace").rstrip("\r")
            if not POLL_LINE.search(line):
                self._lines.append(line)
