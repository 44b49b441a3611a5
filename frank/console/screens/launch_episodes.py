"""The episodes launch dialog (L on the episodes screen): which suite, how many draws, and what that makes,
before anything starts. Enter launches, escape cancels."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from frank.console.state import SuiteRow


@dataclass(frozen=True)
class LaunchEpisodes:
    suite: str
    draws: int


def plan_text(suite: SuiteRow | None, draws: int | None, target: str | None) -> str:
    if suite is None:
        return "pick a suite"
    if draws is None:
        return "draws: a whole number, 1 or more"
    episodes = draws * suite.tasks
    where = f"against the engine at {target}" if target else "no engine is ready: start it first (s)"
    return (
        f"{draws} draw{'s' if draws != 1 else ''} × {suite.tasks} tasks = {episodes} episodes, {where}.\n"
        "The run is a job: it goes on if this console quits; C or `frank jobs cancel RUN` stops it."
    )


class EpisodesLaunch(ModalScreen[LaunchEpisodes | None]):
    DEFAULT_CSS = """
    EpisodesLaunch { align: center middle; }
    EpisodesLaunch > Vertical {
        width: 80; max-width: 96%; height: auto; border: thick $primary; background: $panel; padding: 1 2;
    }
    EpisodesLaunch #launch-title { text-style: bold; margin-bottom: 1; }
    EpisodesLaunch Horizontal { height: auto; }
    EpisodesLaunch Label { padding: 1 1 0 0; }
    EpisodesLaunch #launch-suite { width: 1fr; }
    EpisodesLaunch #launch-draws { width: 10; }
    EpisodesLaunch #launch-plan { margin: 1 0; height: auto; }
    EpisodesLaunch #launch-buttons { align-horizontal: right; }
    EpisodesLaunch Button { width: auto; margin-left: 2; min-width: 12; }
    """
    BINDINGS = [Binding("escape", "cancel", "cancel", id="episodes_launch.cancel")]

    def __init__(self, suites: tuple[SuiteRow, ...], selected: str | None, target: str | None) -> None:
        super().__init__()
        self.suites = suites
        self.selected = selected if any(s.name == selected for s in suites) else suites[0].name
        self.target = target

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Launch episodes", id="launch-title")
            with Horizontal():
                yield Label("suite")
                yield Select(
                    [(f"{s.name} ({s.tasks} tasks)", s.name) for s in self.suites],
                    value=self.selected,
                    allow_blank=False,
                    id="launch-suite",
                )
                yield Label("draws")
                yield Input("1", id="launch-draws", type="integer")
            yield Static("", id="launch-plan", markup=False)
            with Horizontal(id="launch-buttons"):
                yield Button("Cancel (esc)", id="cancel")
                yield Button("Launch (enter)", id="launch", variant="primary")

    def on_mount(self) -> None:
        self._show_plan()
        self.query_one("#launch-draws", Input).focus()

    def choice(self) -> LaunchEpisodes | None:
        suite = self.query_one("#launch-suite", Select).value
        raw = self.query_one("#launch-draws", Input).value.strip()
        if not isinstance(suite, str) or not raw.isdigit() or int(raw) < 1:
            return None
        return LaunchEpisodes(suite, int(raw))

    def _show_plan(self) -> None:
        choice = self.choice()
        suite = next((s for s in self.suites if s.name == self.query_one("#launch-suite", Select).value), None)
        text = plan_text(suite, choice.draws if choice else None, self.target)
        self.query_one("#launch-plan", Static).update(text)
        self.query_one("#launch", Button).disabled = choice is None or self.target is None

    def on_select_changed(self, _event: Select.Changed) -> None:
        self._show_plan()

    def on_input_changed(self, _event: Input.Changed) -> None:
        self._show_plan()

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        self.action_launch()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "launch":
            self.action_launch()
        else:
            self.action_cancel()

    def action_launch(self) -> None:
        choice = self.choice()
        if choice is None or self.target is None:
            self.app.bell()
            return
        self.dismiss(choice)

    def action_cancel(self) -> None:
        self.dismiss(None)
