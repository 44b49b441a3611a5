"""A source's loop: one daemon thread that reads, posts the view when it changed, then waits.

The wait ends early when someone asks for a read now (`poll_now`: a key, a launch, a state change seen in
telemetry); reads never overlap because one thread owns the loop (memray's update thread, dolphie's re-arm
after the previous poll ended). A read that raises is posted once as SourceFailed and retried after the
usual wait: a broken file never stops the console.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from textual.message import Message

from frank.console.messages import SourceFailed
from frank.errors import FrankError

View = TypeVar("View")
Post = Callable[[Message], object]


class Source(Generic[View]):
    name = "source"

    def __init__(self, post: Post) -> None:
        self._post = post
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: View | None = None
        self._failed = ""
        self.wanted = False  # a screen showing this source is up: read at the faster rate

    # -- what a source defines ------------------------------------------------------------------------------
    def read(self) -> View:
        raise NotImplementedError

    def message(self, view: View) -> Message:
        raise NotImplementedError

    def interval(self) -> float:
        """Seconds until the next read (the last view is in self.last)."""
        raise NotImplementedError

    # -- control (any thread) -------------------------------------------------------------------------------
    @property
    def last(self) -> View | None:
        return self._last

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"frank-{self.name}", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._thread = None

    def poll_now(self) -> None:
        self._wake.set()

    def want(self, wanted: bool) -> None:
        changed = wanted != self.wanted
        self.wanted = wanted
        if changed and wanted:
            self.poll_now()

    # -- the loop -------------------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            self.read_once()
            if self._stop.is_set():
                break
            self._wake.wait(self.interval())

    def read_once(self) -> None:
        try:
            view = self.read()
        except Exception as exc:  # noqa: BLE001 -- shown, and the loop goes on
            reason = str(exc) if isinstance(exc, FrankError) else f"{type(exc).__name__}: {exc}"
            if reason != self._failed:
                self._failed = reason
                self._post(SourceFailed(self.name, reason))
            return
        self._failed = ""
        if view != self._last:  # frozen views compare by value: nothing new, nothing posted
            self._last = view
            self._post(self.message(view))
