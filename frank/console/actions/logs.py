"""Log actions: search the whole engine log (a regex over an mmap, in a thread) from a line, either way."""

from __future__ import annotations

from collections.abc import Callable

from frank.console.actions.base import Actions
from frank.console.log_index import LogIndex


class LogActions(Actions):
    def search(
        self, index: LogIndex, pattern: str, start: int, backwards: bool, then: Callable[[int | None], None]
    ) -> None:
        self.in_thread("log-search", lambda: index.search(pattern, start, backwards), then)
