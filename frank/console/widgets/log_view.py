"""A fast view of a big log file (toolong's approach): index line offsets once, read only the lines on
screen, keep recently read lines in an LRU cache, and search the file with a regex over an mmap.

`LogIndex` is plain Python (tested on its own); `LogView` is a ScrollView that renders only the
visible lines, so a 100K-line engine log scrolls as fast as a 100-line one.
"""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from frank.console.log_index import CACHE_LINES, MAX_LINE_CHARS, LogIndex  # noqa: F401  (re-exported)


class LogView(ScrollView, can_focus=True):
    """Renders the lines of a LogIndex that are on screen; follows the end while scrolled to the bottom."""

    DEFAULT_CSS = """
    LogView { background: $surface; }
    LogView > .logview--match { background: $accent 40%; text-style: bold; }
    """
    COMPONENT_CLASSES = {"logview--match"}

    def __init__(self, index: LogIndex | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.index = index or LogIndex(None)
        self.match_line: int | None = None
        self.follow = True

    def set_index(self, index: LogIndex) -> None:
        self.index = index
        self.match_line = None
        self.follow = True
        self.sync()

    def sync(self) -> None:
        """Call after index.refresh(): grow the virtual size, keep following the end."""
        self.virtual_size = Size(max(self.index.max_line_length, 1), self.index.line_count)
        if self.follow:  # after the next layout, when max_scroll_y knows the new size
            self.call_after_refresh(self._to_end)
        self.refresh()

    def _to_end(self) -> None:
        if self.follow:
            self.scroll_y = self.max_scroll_y

    def on_resize(self) -> None:
        # A layout that settles after the last sync (the screen shown, the terminal resized) must not leave
        # a following view short of the end.
        self._to_end()

    def watch_show_horizontal_scrollbar(self, shown: bool) -> None:
        # a horizontal scrollbar that comes (long lines) takes a line from the view, after the move to the end
        if self.follow:
            self.call_after_refresh(self._to_end)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self.follow = new >= self.max_scroll_y

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if index >= self.index.line_count:
            return Strip.blank(width, self.rich_style)
        text = self.index.line(index)
        style = self.rich_style
        if index == self.match_line:
            style = style + self.get_component_rich_style("logview--match")
        elif "ERROR" in text or "Traceback" in text:
            style = style + Style(color=self.app.theme_variables.get("frank-bad"))
        seg = Segment(text[scroll_x : scroll_x + width].ljust(width), style)
        return Strip([seg], width)

    def goto(self, line: int) -> None:
        self.match_line = line
        self.follow = False
        self.scroll_to(y=max(0, line - self.scrollable_content_region.height // 2), animate=False, immediate=True)
        self.refresh()
