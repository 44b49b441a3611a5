"""What screens and action objects may ask of the app, as a Protocol: they depend on this small module and on
frank.console.state, never on frank.console.app (the app imports them, never the reverse).

Screens render `state` (frank.console.state.ConsoleState) and turn keys into the app's actions (bindings
name them: "app.replay_launch") or into the few calls below; they run no timers and no workers of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from frank.console.config import Settings
from frank.console.log_index import LogIndex
from frank.console.services import Services
from frank.console.state import CampaignPart, ConsoleState


class Host(Protocol):
    state: ConsoleState
    services: Services
    settings: Settings
    read_only: bool

    # -- Textual's App (the parts the actions use) --------------------------------------------------------
    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: Any = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...
    def push_screen(self, screen: Any, callback: Any = None, wait_for_dismiss: bool = False) -> Any: ...
    def run_worker(
        self,
        work: Any,
        name: str | None = "",
        group: str = "default",
        description: str = "",
        exit_on_error: bool = True,
        start: bool = True,
        exclusive: bool = False,
        thread: bool = False,
    ) -> Any: ...
    def call_from_thread(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...
    def switch_mode(self, mode: str) -> Any: ...
    def exit(self, result: Any = None, return_code: int = 0, message: Any = None) -> None: ...

    @property
    def screen(self) -> Any: ...

    # -- the console's own --------------------------------------------------------------------------------
    def confirm(self, title: str, body: str, then: Callable[[], Any], yes: str = "Yes") -> None: ...
    def set_busy(self, busy: str) -> None: ...
    def guard(self, what: str) -> bool: ...
    def refresh_engine(self) -> None: ...
    def follow_job(self, run_id: str) -> None: ...
    def reload_jobs(self) -> None: ...
    def follow_run(self, run_id: str | None) -> None: ...
    def reload_experiments(self) -> None: ...
    def follow_episodes(self, run_id: str) -> None: ...
    def launch_episodes(self, suite: str | None) -> None: ...
    def read_campaign(self) -> None: ...
    def campaign_action(self, call: str, part: CampaignPart | None) -> None: ...
    def search_log(
        self, index: LogIndex, pattern: str, start: int, backwards: bool, then: Callable[[int | None], None]
    ) -> None: ...
