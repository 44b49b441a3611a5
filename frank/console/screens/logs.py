"""Logs: the engine log, scrollable and searchable (/ search, n / N next / previous, G end, g top).

Indexing and searching run in thread workers; the view reads only the lines on screen (LogView)."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Header, Input, Static

from frank.console.screens.base import FrankScreen
from frank.console.widgets.footer import FrankFooter
from frank.console.widgets.log_view import LogIndex, LogView


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

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.pattern = ""
        self._path: str | None = None

    def compose(self) -> ComposeResult:
        yield Header(icon="≡")
        yield Static("", id="log-status")
        yield LogView(id="logview")
        yield Input(placeholder="search (regex, case-insensitive) — enter finds, escape closes", id="log-search")
        yield FrankFooter()

    def on_mount(self) -> None:
        self.query_one("#log-search", Input).display = False
        self.query_one(LogView).focus()
        self.refresh_view()

    def refresh_view(self) -> None:
        app = self.frank
        path = getattr(app.engine_status, "log_path", None)
        if path is None:
            try:
                path = str(app.services.controller.log_path())
            except Exception:
                path = None
        view = self.query_one(LogView)
        if path != self._path:
            self._path = path
            view.set_index(LogIndex(path))
        self.reindex()

    @work(thread=True, exclusive=True, group="log-index", exit_on_error=False)
    def reindex(self) -> None:
        view = self.query_one(LogView)
        index = view.index
        if index.refresh() or index.line_count == 0:
            self.app.call_from_thread(self._indexed, index)

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

    @work(thread=True, exclusive=True, group="log-search", exit_on_error=False)
    def find(self, backwards: bool) -> None:
        if not self.pattern:
            self.app.call_from_thread(self.app.notify, "press / to search first", severity="warning")
            return
        view = self.query_one(LogView)
        start = view.match_line if view.match_line is not None else int(view.scroll_offset.y)
        line = view.index.search(self.pattern, start, backwards)
        self.app.call_from_thread(self._found, line)

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
