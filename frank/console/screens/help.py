"""The help screen: every key the console knows, with its binding id (remap it in console.toml)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 84; max-width: 98%; height: 90%; border: thick $primary; background: $panel; padding: 0 2;
    }
    """
    BINDINGS = [Binding("escape,q,question_mark,f1", "app.pop_screen", "close", id="help.close")]

    def __init__(self, sections: list[tuple[str, list[tuple[str, str, str]]]], config_path: str) -> None:
        super().__init__()
        self.sections = sections
        self.config_path = config_path

    def compose(self) -> ComposeResult:
        lines = ["[bold]frank console keys[/]  [$frank-idle](escape closes)[/]", ""]
        for title, rows in self.sections:
            lines.append(f"[bold $primary]{escape(title)}[/]")
            for key, description, binding_id in rows:
                lines.append(
                    f"  [bold]{escape(key):<12}[/] {escape(description):<40} [$frank-idle]{escape(binding_id)}[/]"
                )
            lines.append("")
        lines.append('[$frank-idle]Remap a key: add  "BINDING-ID" = "KEY"  under [keymap] in[/]')
        lines.append(f"[$frank-idle]{escape(self.config_path)}[/]")
        lines.append("[$frank-idle]ctrl+p opens the command palette: every action is there.[/]")
        with VerticalScroll():
            yield Static("\n".join(lines))
