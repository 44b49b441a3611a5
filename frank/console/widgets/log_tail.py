"""The last lines of the engine log (the dashboard's panel; the Logs screen has the full view)."""

from __future__ import annotations

from typing import Any

from textual.markup import escape

from frank.console.widgets.base import Panel


class LogTail(Panel):
    DEFAULT_CSS = """
    LogTail { height: 1fr; min-height: 3; overflow: hidden hidden; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("engine log", **kwargs)

    def show(self, lines: list[str], path: str | None = None, folded: int = 0) -> None:
        """`folded`: lines of a clean stop's shutdown output left out before the last line (still in the
        log: the logs screen, 4, shows them)."""
        if path:
            self.set_subtitle(path)
        if not lines:
            self.set_markup("[$frank-idle](the log is empty: the engine writes it once started, s)[/]")
            return
        width = max(10, self.content_size.width or 120)
        height = self.content_size.height
        styled = [_style(escape(line[:width])) for line in lines]
        if folded:
            note = f"({folded} lines of vLLM's shutdown output after a clean stop, no error: in the log, 4)"
            styled.insert(len(styled) - 1, f"[$frank-idle]{escape(note[:width])}[/]")
        if height > 0:  # a tail shows the newest lines that fit, not the oldest
            styled = styled[-height:]
        self.set_markup("\n".join(styled))


def _style(line: str) -> str:
    if "ERROR" in line or "Traceback" in line:
        return f"[$frank-bad]{line}[/]"
    if "WARNING" in line:
        return f"[$frank-warn]{line}[/]"
    return line
