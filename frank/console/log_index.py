"""The index of a big log file (toolong's approach): line offsets indexed once (and extended as the file
grows), lines read on demand through an LRU cache, regex search over an mmap. Plain Python: the engine
source refreshes it in its thread, LogView (widgets/log_view.py) renders the lines on screen."""

from __future__ import annotations

import mmap
import os
import re
import threading
from bisect import bisect_right
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

CACHE_LINES = 4096
MAX_LINE_CHARS = 4000  # a pathological line is cut, never allowed to stall a render


class LogIndex:
    """Offsets of every line start in a file that only grows (or is rotated: then it is re-indexed)."""

    def __init__(self, path: Path | str | None) -> None:
        self.path = Path(path) if path else None
        self._starts = np.zeros(1, dtype=np.int64)  # offset of each line start; the last is EOF
        self._size = 0
        self._ino: int | None = None
        self._max_len = 0
        self._cache: OrderedDict[int, str] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def line_count(self) -> int:
        return len(self._starts) - 1

    @property
    def max_line_length(self) -> int:
        return self._max_len

    def refresh(self) -> bool:
        """Index what was appended since the last call; True when the line count changed. Thread-safe."""
        if self.path is None:
            return False
        try:
            st = os.stat(self.path)
        except OSError:
            changed = self.line_count > 0
            self._reset()
            return changed
        with self._lock:
            if st.st_ino != self._ino or st.st_size < self._size:
                self._reset()
                self._ino = st.st_ino
            if st.st_size == self._size:
                return False
            before = self.line_count
            with open(self.path, "rb") as handle:
                handle.seek(self._size)
                data = handle.read(st.st_size - self._size)
            # Only whole lines are indexed: a partial last line waits for its newline.
            newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10) + self._size + 1
            if len(newlines):
                starts = np.concatenate([self._starts, newlines])
                lengths = np.diff(starts)
                self._max_len = max(self._max_len, int(lengths.max()) if len(lengths) else 0)
                self._starts = starts
                self._size = int(newlines[-1])
            return self.line_count != before

    def _reset(self) -> None:
        self._starts = np.zeros(1, dtype=np.int64)
        self._size = 0
        self._max_len = 0
        self._cache.clear()

    def line(self, index: int) -> str:
        """Line `index` (0-based) without its newline, from the LRU cache or the file."""
        cached = self._cache.get(index)
        if cached is not None:
            self._cache.move_to_end(index)
            return cached
        if not 0 <= index < self.line_count or self.path is None:
            return ""
        start, end = int(self._starts[index]), int(self._starts[index + 1])
        try:
            with open(self.path, "rb") as handle:
                handle.seek(start)
                raw = handle.read(min(end - start, MAX_LINE_CHARS * 4))
        except OSError:
            return ""
        text = raw.decode("utf-8", errors="replace").rstrip("\r\n").expandtabs(4)[:MAX_LINE_CHARS]
        self._cache[index] = text
        if len(self._cache) > CACHE_LINES:
            self._cache.popitem(last=False)
        return text

    def search(self, pattern: str, start_line: int, backwards: bool = False) -> int | None:
        """The next line (after `start_line`, or before it going backwards) matching the case-insensitive
        regex (or plain text when it is not a valid regex), wrapping around; None when nothing matches."""
        if self.path is None or self.line_count == 0 or not pattern:
            return None
        try:
            regex = re.compile(pattern.encode(), re.IGNORECASE | re.MULTILINE)
        except re.error:
            regex = re.compile(re.escape(pattern.encode()), re.IGNORECASE)
        end = int(self._starts[-1])
        with open(self.path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            hits = self._line_of(m.start() for m in regex.finditer(mm, 0, end))
            if not hits:
                return None
        if backwards:
            before = [h for h in hits if h < start_line]
            return before[-1] if before else hits[-1]
        after = [h for h in hits if h > start_line]
        return after[0] if after else hits[0]

    def _line_of(self, offsets: Any) -> list[int]:  # offsets: a numpy array of byte offsets
        starts = self._starts.tolist()
        out: list[int] = []
        for off in offsets:
            line = bisect_right(starts, off) - 1
            if not out or out[-1] != line:
                out.append(line)
        return out
