"""A Footer that rebuilds its keys only when the keys it would show changed.

Textual's Footer recomposes on every bindings signal (each focus change, each mode switch); rebuilding its
dozen FooterKeys restyles each one and cost tens of milliseconds per keypress on a loaded 2-core box.
"""

from __future__ import annotations

from typing import Any

from textual.screen import Screen
from textual.widgets import Footer


class FrankFooter(Footer):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("show_command_palette", False)
        super().__init__(**kwargs)
        self._shown: tuple[object, ...] | None = None

    def _signature(self) -> tuple[object, ...]:
        return tuple(
            (b.key, b.description, b.action, enabled, tooltip)
            for (_, b, enabled, tooltip) in self.screen.active_bindings.values()
            if b.show
        )

    def bindings_changed(self, screen: Screen[Any]) -> None:
        if self.is_attached and screen is self.screen and screen.app.app_focus:
            signature = self._signature()
            if self._bindings_ready and signature == self._shown:
                return
            self._shown = signature
        super().bindings_changed(screen)
