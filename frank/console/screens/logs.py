"""Logs: the engine log, scrollable and searchable (/ search, n / N next / previous, G end, g top).

The log source indexes the log in its thread while this screen is up (its view carries the index);
a search runs in a thread worker of the app (LogActions); the view reads only the lines on screen."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Header, Input, Static

from frank.console.log_index import LogIndex
from frank.console.screens.base import FrankScreen
from frank.console.state import ConsoleState
from frank.console.widgets.footer import FrankFooter
from frank.console.widgets.log_view import LogView


class LogsScreen(FrankScreen):
    TITLE = "logs"
    BINDINGS = [
        Binding("slash", "search", "search", id="logs.search"),
        Binding("n", "next_match", "next", id="logs.next"),
        Binding("N", "prev_match", "previous", id="logs.prev"),
        Binding("G,end", "end", "end", id="logs.end"),
        Binding("g,home", "top", "top", id="logs.top", show=False),
        Binding("escape", "close_search", "close search", id="logs.close_search", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pattern = ""
        self._path: str | None = None

    def compose(self) -> ComposeResult:
        yield Header(icon="≡")
        yield Static("[$frank-idle]no log yet: the engine writes it once started (s)[/]", id="log-status")
        yield LogView(id="logview")
        yield Input(placeholder="search (regex, case-insensitive) — enter finds, escape closes", id="log-search")
        yield FrankFooter()

    def on_mount(self) -> None:
        self.query_one("#log-search", Input).display = False
        self.query_one(LogView).focus()
        self._lines = -1
        self.render_state(self.host.state)

    def render_state(self, state: ConsoleState) -> None:
        indexed = state.log
        index = indexed.index
        if index is None:
            return  # the log source indexes the log once it knows this screen is up
        view = self.query_one(LogView)
        if index is not view.index:
            self._path = str(index.path) if index.path else None
            view.set_index(index)
            self._lines = -1
        if indexed.lines != self._lines:
            self._lines = indexed.lines
            self._indexed(index)

    def _indexed(self, index: LogIndex) -> None:
        view = self.query_one(LogView)
        if view.index is index:
            view.sync()
        where = self._path or "no log yet"
        match = f" · match on line {view.match_line + 1}" if view.match_line is not None else ""
        follow = " · following" if view.follow else ""
        self.query_one("#log-status", Static).update(
            f"[$frank-idle]{where} · {index.line_count:,} lines{match}{follow}[/]"
        )

    def action_search(self) -> None:
        box = self.query_one("#log-search", Input)
        box.display = True
        box.focus()

    def action_close_search(self) -> None:
        box = self.query_one("#log-search", Input)
        box.display = False
        self.query_one(LogView).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.pattern = event.value
        self.action_close_search()
        self.find(False)

    def action_next_match(self) -> None:
        self.find(False)

    def action_prev_match(self) -> None:
        self.find(True)

    def find(self, backwards: bool) -> None:
        if not self.pattern:
            self.app.notify("press / to search first", severity="warning")
            return
        view = self.query_one(LogView)
        start = view.match_line if view.match_line is not None else int(view.scroll_offset.y)
        self.host.search_log(view.index, self.pattern, start, backwards, self._found)

    def _found(self, line: int | None) -> None:
        if line is None:
            self.app.notify(f"no line matches {self.pattern!r}", severity="warning")
            return
        self.query_one(LogView).goto(line)
        self._indexed(self.query_one(LogView).index)

    def action_end(self) -> None:
        view = self.query_one(LogView)
        view.follow = True
        view.scroll_end(animate=False)

    def action_top(self) -> None:
        view = self.query_one(LogView)
        view.follow = False
        view.scroll_home(animate=False)
