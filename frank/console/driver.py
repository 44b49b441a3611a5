"""The terminal driver: Textual's LinuxDriver with an input thread that sleeps until there is input.

Textual's input thread wakes every 100 ms to tick its escape-sequence parser (a lone ESC becomes the escape
key once a short timeout passes). Idle, those ten wake-ups a second cost about 0.1% of a core, a third of
what the idle console spends. This thread waits on stdin with no timeout, or only until the parser's own
deadline while a sequence is half read; setting `exit_event` also writes to a pipe the thread waits on, so
stopping (quit, suspend) is as prompt as before. The loop is Textual 8.2's `run_input_thread` otherwise.
"""

from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder
from threading import Event
from typing import Any

from textual._loop import loop_last
from textual._parser import ParseError
from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

# The Textual release whose private input loop (LinuxDriver.run_input_thread, XTermParser, textual._time)
# this copies (tests/console/test_textual_pin.py): on another release, compare first.
WRITTEN_AGAINST = "8.2.8"
FALLBACK_TICK_S = 0.1  # Textual's own period, should a parser not say when it times out


class _WakingEvent(Event):
    """An Event whose set() also wakes a thread blocked in select() on the pipe's read end."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self._wake_fd = wake_fd

    def set(self) -> None:
        super().set()
        try:
            os.write(self._wake_fd, b"\0")
        except OSError:  # the pipe is full (a wake-up is pending anyway) or closed
            pass


class QuietLinuxDriver(LinuxDriver):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self.exit_event = _WakingEvent(self._wake_write)
        self.input_wakeups = 0  # times the input thread woke (a test counts them)

    def close(self) -> None:
        super().close()
        for fd in (self._wake_read, self._wake_write):
            try:
                os.close(fd)
            except OSError:
                pass

    def run_input_thread(self) -> None:
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        selector.register(self._wake_read, selectors.EVENT_READ)
        fileno = self.fileno
        parser = XTermParser(self._debug)
        feed, tick = parser.feed, parser.tick
        decode = getincrementaldecoder("utf-8")().decode

        def timeout() -> float | None:
            deadline = getattr(parser, "_timeout_time", get_time() + FALLBACK_TICK_S)
            return None if deadline is None else max(0.0, deadline - get_time())

        def process(events: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> None:
            self.input_wakeups += 1
            if any(key.fd == self._wake_read for key, _ in events):
                _drain(self._wake_read)
            for last, (_key, mask) in loop_last([e for e in events if e[0].fd == fileno]):
                if mask & selectors.EVENT_READ:
                    data = decode(os.read(fileno, 1024 * 4), final=final and last)
                    if not data:  # stdin is piped
                        break
                    for event in feed(data):
                        self.process_message(event)
            for event in tick():
                self.process_message(event)

        try:
            while not self.exit_event.is_set():
                process(selector.select(timeout()))
            selector.unregister(fileno)
            process(selector.select(FALLBACK_TICK_S), final=True)
        finally:
            selector.close()
            try:
                for _ in feed(""):
                    pass
            except (EOFError, ParseError):
                pass


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except OSError:  # empty (non-blocking)
        pass
