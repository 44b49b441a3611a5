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

    def set_subtitle(self, text: str) -> None:
        """Setting a border title repaints the widget even when the text is the same: skip that."""
        if getattr(self, "_subtitle", None) != text:
            self._subtitle = text
            self.border_subtitle = text

    @property
    def markup_text(self) -> str:
        return self._markup


def update_text(widget: Static, markup: str) -> None:
    """Static.update without a screen layout pass when the text keeps its line count (and skip no-ops)."""
    old = getattr(widget, "_frank_markup", None)
    if markup == old:
        return
    widget._frank_markup = markup  # type: ignore[attr-defined]
    widget.update(markup, layout=old is None or old.count("\n") != markup.count("\n"))
