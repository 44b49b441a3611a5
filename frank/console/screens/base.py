"""Base screen: renders the app's state (ConsoleState), never polls; `-narrow` below 110 columns or 30 rows."""

from __future__ import annotations

from typing import Any, cast

from textual import events
from textual.screen import Screen

from frank.console.compositor import FrankCompositor
from frank.console.host import Host
from frank.console.state import ConsoleState

NARROW_WIDTH = 110
SHORT_HEIGHT = 30


class FrankScreen(Screen[None]):
    """The app calls `render_state` with the newest state when it changed while this screen is up, and when
    the screen is shown again (a mode switch); a screen draws only the parts whose view is new."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._compositor = FrankCompositor()  # a partial repaint renders only the widgets it reaches

    @property
    def host(self) -> Host:
        return cast(Host, self.app)

    def render_state(self, state: ConsoleState) -> None:
        """Draw `state`; the default draws nothing."""

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < NARROW_WIDTH or event.size.height < SHORT_HEIGHT, "-narrow")

    def on_screen_resume(self) -> None:
        if self.is_mounted:
            self.call_after_refresh(lambda: self.render_state(self.host.state))
