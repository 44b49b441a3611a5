"""A panel that redraws only what changed: no-op updates are skipped, and an update that keeps every line
in place repaints only the lines whose text differs (at idle most of a panel stays as it was)."""

from __future__ import annotations

from typing import Any, Self

from textual.content import Content
from textual.geometry import Region
from textual.widgets import Static


class Panel(Static):
    """A bordered Static whose content is Textual markup (`set_markup`); a panel redrawn every sample is a
    LinePanel (frank/console/widgets/line_panel.py)."""

    DEFAULT_CSS = """
    Panel { border: round $frank-border; border-title-color: $frank-idle; border-subtitle-color: $frank-idle;
            padding: 0 1; height: auto; }
    Panel:focus { border: round $primary; }
    """

    def __init__(self, title: str = "", **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.border_title = title
        self._markup = ""
        self._content: Content | None = None
        self._lines: list[Content] = []
        self._dirty_rows: tuple[int, ...] | None = None

    def set_markup(self, markup: str) -> bool:
        if markup == self._markup:
            return False
        self._markup = markup
        content = Content.from_markup(markup)
        return self._show(content, content.split("\n"))

    def _show(self, content: Content, new_lines: list[Content]) -> bool:
        old, old_lines = self._content, self._lines
        if content == old:
            return False
        self._content, self._lines = content, new_lines
        # Same number of lines: no layout pass (one of the whole screen costs far more than the repaint).
        layout = len(old_lines) != len(new_lines)
        width = self.content_size.width
        if not layout and width and all(line.cell_length <= width for line in (*old_lines, *new_lines)):
            # Nothing wraps, so line i is row i: repaint only the rows that changed.
            self._dirty_rows = tuple(y for y, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b)
        self.update(content, layout=layout)
        self._dirty_rows = None
        return True

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False) -> Self:
        rows = getattr(self, "_dirty_rows", None) if not (regions or layout or recompose) else None
        if rows:
            width = self.content_size.width
            regions = tuple(Region(0, y, width, 1) for y in rows)
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def set_subtitle(self, text: str) -> None:
        """Setting a border title repaints the widget even when the text is the same: skip that."""
        if getattr(self, "_subtitle", None) != text:
            self._subtitle = text
            self.border_subtitle = text

    @property
    def markup_text(self) -> str:
        if self._markup or self._content is None:
            return self._markup
        return self._content.markup


def update_text(widget: Static, markup: str) -> None:
    """Static.update without a screen layout pass when the text keeps its line count (and skip no-ops)."""
    old = getattr(widget, "_frank_markup", None)
    if markup == old:
        return
    # the last markup, kept on the widget itself (Static declares no such attribute)
    widget._frank_markup = markup  # type: ignore[attr-defined]
    widget.update(markup, layout=old is None or old.count("\n") != markup.count("\n"))
