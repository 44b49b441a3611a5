"""The current replay or experiment: a label, a progress bar and one line of running totals."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.widgets import ProgressBar, Static

from frank.console.widgets.base import update_text

IDLE = "[$frank-idle]nothing running: launch a replay (2) or an experiment (3)[/]"


class RunProgress(Vertical):
    DEFAULT_CSS = """
    RunProgress { border: round $frank-border; border-title-color: $frank-idle; padding: 0 1; height: auto; }
    RunProgress > Static { height: auto; }
    RunProgress ProgressBar Bar { width: 1fr; }
    RunProgress ProgressBar { width: 1fr; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.border_title = "run"
        self._state: tuple[object, ...] | None = None
        self._bar: ProgressBar | None = None

    def compose(self) -> ComposeResult:
        yield Static(IDLE, id="run-label")
        # No bar while nothing runs: a ProgressBar redraws its ETA every second even when hidden.
        yield Static("", id="run-totals")

    def show(
        self, title: str | None, done: int = 0, total: int | None = None, totals: str = "", state: str = "running"
    ) -> None:
        key = (title, done, total, totals, state)
        if key == self._state:
            return
        self._state = key
        label = self.query_one("#run-label", Static)
        if title is None:
            update_text(label, IDLE)
            if self._bar is not None:
                self._bar.remove()
                self._bar = None
            self.query_one("#run-totals", Static).display = False
            return
        style = {"running": "$frank-ok", "failed": "$frank-bad", "done": "$frank-idle"}.get(state, "$frank-warn")
        update_text(
            label, f"[{style}]{escape(state)}[/] {escape(title)}  [$frank-idle]{done}/{total if total else '?'}[/]"
        )
        if self._bar is None:
            self._bar = ProgressBar(total=total, show_eta=True)
            self.mount(self._bar, after=label)
        self._bar.update(total=total, progress=done)
        totals_widget = self.query_one("#run-totals", Static)
        update_text(totals_widget, escape(totals))
        totals_widget.display = bool(totals)
