"""Pick a knob and a value (k). The list says how each knob applies: live, or by restarting the engine."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option


class KnobScreen(ModalScreen["tuple[str, Any] | None"]):
    DEFAULT_CSS = """
    KnobScreen { align: center middle; }
    KnobScreen > Vertical { width: 76; max-width: 98%; height: auto; max-height: 90%;
                            border: thick $primary; background: $panel; padding: 0 1; }
    KnobScreen OptionList { height: auto; max-height: 20; }
    """
    BINDINGS = [Binding("escape,q", "dismiss(None)", "close", id="knobs.close")]

    def __init__(self, knobs: dict[str, Any], values: dict[str, Any]) -> None:
        super().__init__()
        self.knobs, self.values = knobs, values

    def compose(self) -> ComposeResult:
        options: list[Option] = []
        for name, knob in self.knobs.items():
            current = self.values.get(name, knob.default)
            how = "restart" if knob.needs_restart else "live"
            for value in knob.values:
                mark = "●" if str(value) == str(current) else " "
                options.append(Option(f"{mark} {name} = {value}   ({how})", id=f"{name}\x00{value}"))
        with Vertical():
            yield Static("[bold]Set a knob[/]  enter applies · escape closes · ● is the current value")
            if options:
                yield OptionList(*options)
            else:
                yield Static("[$frank-idle]this profile has no knobs[/]")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        name, _, raw = (event.option.id or "").partition("\x00")
        knob = self.knobs[name]
        value = next((v for v in knob.values if str(v) == raw), raw)
        self.dismiss((name, value))
