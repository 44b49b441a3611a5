"""A panel that redraws only when its text changed (a slow SSH link gets only what changed)."""
from __future__ import annotations

from textual.widgets import Static


class Panel(Static):
    """A bordered Static whose content is a Textual markup string; `set_markup` skips no-op updates."""

    DEFAULT_CSS = """
    Panel { border: round $frank-border; border-title-color: $frank-idle; border-subtitle-color: $frank-idle;
            padding: 0 1; height: auto; }
    Panel:focus { border: round $primary; }
    """

    def __init__(self, title: str = "", **kwargs) -> None:
        super().__init__("", **kwargs)
        self.border_title = title
        self._markup = ""

    def set_markup(self, markup: str) -> bool:
        if markup == self._markup:
            return False
        # Same number of lines: repaint only; a layout pass of the whole screen costs far more.
        layout = markup.count("\n") != self._markup.count("\n") or not self._markup
        self._markup = markup
        self.update(markup, layout=layout)
        return True

    @property
    def markup_text(self) -> str:
        return self._markup
