"""A text to read (a run's report, as the CLI prints it), scrollable; escape closes it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class TextScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    TextScreen { align: center middle; }
    TextScreen > VerticalScroll {
        width: 110; max-width: 98%; height: 90%; border: thick $primary; background: $panel; padding: 0 1;
    }
    TextScreen #text-title { text-style: bold; }
    """
    BINDINGS = [Binding("escape,q", "app.pop_screen", "close", id="text.close")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text, self.text = title, text

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(f"{self.title_text}  (escape closes)", id="text-title", markup=False)
            yield Static(self.text, markup=False)
