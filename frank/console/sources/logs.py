"""The engine log's line index for the logs screen: while it is up, extended every refresh by the bytes
appended since the last read (a rotated log is indexed afresh). Nobody looking: no reads at all."""

from __future__ import annotations

from frank.console.log_index import LogIndex
from frank.console.messages import LogRead
from frank.console.sources.base import Post, Source
from frank.console.state import LogIndexed

UNWANTED_S = 3600.0  # asleep until the logs screen is shown (want() wakes it)


class LogSource(Source[LogIndexed]):
    name = "log"

    def __init__(self, post: Post, refresh_s: float) -> None:
        super().__init__(post)
        self.refresh_s = refresh_s
        self.path: str | None = None  # the app sets it from the engine's status
        self._index: LogIndex | None = None

    def message(self, view: LogIndexed) -> LogRead:
        return LogRead(view)

    def interval(self) -> float:
        return self.refresh_s if self.wanted else UNWANTED_S

    def read(self) -> LogIndexed:
        if not self.wanted or self.path is None:
            return self.last or LogIndexed()
        if self._index is None or str(self._index.path) != self.path:
            self._index = LogIndex(self.path)
        self._index.refresh()
        return LogIndexed(self._index, self._index.line_count)
