"""A yes/no dialog before anything that kills in-flight work (or an offer: start the engine). Escape or n
answers no."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmDialog(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmDialog { align: center middle; }
    ConfirmDialog > Vertical {
        width: 92; max-width: 96%; height: auto; border: thick $warning; background: $panel; padding: 1 2;
    }
    ConfirmDialog #confirm-title { text-style: bold; margin-bottom: 1; }
    ConfirmDialog #confirm-body { height: auto; max-height: 16; margin-bottom: 1; }
    ConfirmDialog Horizontal { width: 100%; height: auto; align-horizontal: right; }
    ConfirmDialog Button { width: auto; margin-left: 2; min-width: 12; }
    """
    BINDINGS = [
        Binding("y", "answer(True)", "yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "no", id="confirm.no"),
    ]

    def __init__(
        self, title: str, body: str = "", yes: str = "Yes", no: str = "Cancel", *, default_yes: bool = False
    ) -> None:
        super().__init__()
        self.title_text, self.body, self.yes, self.no = title, body, yes, no
        self.default_yes = default_yes  # an offer (start the engine) rather than a warning

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, id="confirm-title", markup=False)
            if self.body:
                yield Static(self.body, id="confirm-body", markup=False)
            with Horizontal():
                yield Button(f"{self.no} (n)", id="no")
                yield Button(f"{self.yes} (y)", id="yes", variant="warning")

    def on_mount(self) -> None:
        # the safe answer is the default, but for an offer that kills nothing
        self.query_one("#yes" if self.default_yes else "#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)
