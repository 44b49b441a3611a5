"""Base screen: a failed worker of the screen becomes a notification with its reason, never a traceback."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.screen import Screen
from textual.worker import Worker, WorkerState

from frank.errors import FrankError

if TYPE_CHECKING:
    from frank.console.app import FrankApp


NARROW_WIDTH = 110
SHORT_HEIGHT = 30


class FrankScreen(Screen):
    """Adds `-narrow` below 110 columns or 30 rows: the TCSS stacks or tabs the panels then."""

    @property
    def frank(self) -> FrankApp:
        """The app, typed: its services and the state its workers' messages keep."""
        return self.app  # type: ignore[return-value]

    def on_resize(self, event) -> None:
        self.set_class(event.size.width < NARROW_WIDTH or event.size.height < SHORT_HEIGHT, "-narrow")

    def on_screen_resume(self) -> None:
        """Coming back to a screen (a mode switch) draws the latest state at once, not on the next tick."""
        refresh = getattr(self, "refresh_view", None)
        if refresh is not None and self.is_mounted:
            self.call_after_refresh(refresh)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            reason = str(error) if isinstance(error, FrankError) else f"{type(error).__name__}: {error}"
            self.app.notify(reason, title=event.worker.group, severity="error", timeout=10)
