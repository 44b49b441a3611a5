"""A panel for text that changes every sample: rows of styled pieces drawn through Textual's line API.

A Static re-renders its whole content (format, wrap, a style parse per span) whenever any of it changes,
and that was most of what the idle console spent on a sample. Here a new row costs one Strip, built from
its pieces with styles resolved once per theme; rows that did not change keep their Strip and are not
repainted. Rows are cut to the panel's width, never wrapped (a wrap would change the height and re-lay
out the whole screen).
"""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.style import Style
from textual.widget import Widget

Piece = tuple[str, str]  # (text, style: "$frank-idle", "bold", ...; "" is the panel's own)
Row = tuple[Piece, ...]


class LinePanel(Widget):
    DEFAULT_CSS = """
    LinePanel { border: round $frank-border; border-title-color: $frank-idle; border-subtitle-color: $frank-idle;
                padding: 0 1; height: auto; }
    LinePanel:focus { border: round $primary; }
    """

    def __init__(self, title: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.border_title = title
        self._rows: tuple[Row, ...] = ()
        self._strips: dict[int, Strip] = {}
        self._styles: dict[str, RichStyle] = {}
        self._base: Style | None = None  # the base style and width the cached Strips were drawn with
        self._width = 0

    @property
    def rows(self) -> tuple[Row, ...]:
        return self._rows

    @property
    def text(self) -> str:
        return "\n".join("".join(text for text, _ in row) for row in self._rows)

    @property
    def markup_text(self) -> str:
        """The rows as Textual markup (what a Static showing them would hold; tests read it)."""
        return "\n".join("".join(f"[{s}]{t}[/]" if s else t for t, s in row) for row in self._rows)

    def set_rows(self, rows: list[Row] | tuple[Row, ...]) -> bool:
        """Show these rows; repaints only the rows that changed. False when nothing did."""
        rows = tuple(tuple(row) for row in rows)
        old = self._rows
        if rows == old:
            return False
        self._rows = rows
        if len(rows) != len(old):
            self._strips.clear()
            self.refresh(layout=True)  # a new height
            return True
        changed = [y for y, (a, b) in enumerate(zip(old, rows)) if a != b]
        for y in changed:
            self._strips.pop(y, None)
        width = self.size.width
        if width:
            self.refresh(*(Region(0, y, width, 1) for y in changed))
        else:
            self.refresh()
        return True

    def set_subtitle(self, text: str) -> None:
        """Setting a border title repaints the widget even when the text is the same: skip that."""
        if getattr(self, "_subtitle", None) != text:
            self._subtitle = text
            self.border_subtitle = text

    # -- Textual's line API ------------------------------------------------------------------------------
    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._rows)

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return max((sum(len(text) for text, _ in row) for row in self._rows), default=0)

    def render_line(self, y: int) -> Strip:
        base, width = self.visual_style, self.size.width
        if base is not self._base or width != self._width:  # a theme switch, a resize: every row anew
            self._base, self._width = base, width
            self._strips.clear()
            self._styles.clear()
        strip = self._strips.get(y)
        if strip is None:
            plain = base.rich_style
            row = self._rows[y] if y < len(self._rows) else ()
            segments = [Segment(text, self._style(style, base) if style else plain) for text, style in row]
            strip = self._strips[y] = Strip(segments).adjust_cell_length(width, plain)
        return strip

    def _style(self, name: str, base: Style) -> RichStyle:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = (base + Style.parse(name)).rich_style
        return style
