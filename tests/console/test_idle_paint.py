"""What the idle console paints per sample: only the rows that changed, only the widgets a change reaches,
and an input thread that sleeps while no key comes (benchmarks/bench_console.py measures the CPU)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import tty

from textual import events
from textual.app import App
from textual.widgets import Footer

from frank.console import themes
from frank.console.compositor import FrankCompositor
from frank.console.driver import QuietLinuxDriver
from frank.console.screens.base import FrankScreen
from frank.console.state import ConsoleState
from frank.console.widgets.cpu_panel import CpuPanel
from frank.console.widgets.line_panel import LinePanel
from tests.console.conftest import READY, wait_until

ROWS = [(("cpu", "$frank-idle"), (" 12%", "")), (("all", "$frank-idle"), (" ▂▃", "$frank-spark")), (("ram", ""),)]


class TwoPanels(FrankScreen):
    def compose(self):
        yield LinePanel("a", id="a")
        yield LinePanel("b", id="b")
        yield Footer()


class TwoPanelsApp(App):
    state = ConsoleState()  # what a FrankScreen renders when it is shown

    def __init__(self) -> None:
        super().__init__()
        for theme in themes.THEMES.values():  # the $frank-* variables the panels' CSS uses
            self.register_theme(theme)
        self.theme = "frank-dark"

    def on_mount(self) -> None:
        self.push_screen(TwoPanels())


def _count_calls(obj, name: str) -> list:
    calls: list = []
    original = getattr(obj, name)

    def counted(*args):
        calls.append(args)
        return original(*args)

    setattr(obj, name, counted)  # an instance attribute: Textual looks the method up on the widget
    return calls


async def test_a_line_panel_repaints_only_the_row_that_changed_and_nothing_for_the_same_rows():
    app = TwoPanelsApp()
    async with app.run_test(size=(60, 16)) as pilot:
        panel = app.screen.query_one("#a", LinePanel)
        assert panel.set_rows(ROWS)
        await pilot.pause(0.2)
        assert panel.text == "cpu 12%\nall ▂▃\nram"
        lines = _count_calls(panel, "render_line")
        assert not panel.set_rows([tuple(row) for row in ROWS])  # equal rows: no refresh at all
        await pilot.pause(0.2)
        assert lines == []
        assert panel.set_rows([ROWS[0], (("all", "$frank-idle"), (" ▃▅", "$frank-spark")), ROWS[2]])
        await pilot.pause(0.2)
        assert lines == [(1,)]  # row 1 only: rows 0 and 2 keep their Strips
        assert panel.set_rows([*ROWS, (("busiest", ""),)])  # a new row: a new height, every row drawn
        await pilot.pause(0.2)
        assert sorted(y for (y,) in lines[1:]) == [0, 1, 2, 3]
        assert panel.size.height == 4


async def test_a_partial_repaint_renders_only_the_widgets_it_reaches():
    app = TwoPanelsApp()
    async with app.run_test(size=(60, 16)) as pilot:
        screen = app.screen
        assert isinstance(screen._compositor, FrankCompositor)
        a, b = screen.query_one("#a", LinePanel), screen.query_one("#b", LinePanel)
        a.set_rows(ROWS)
        b.set_rows(ROWS)
        await pilot.pause(0.2)
        drawn_a, drawn_b = _count_calls(a, "render_lines"), _count_calls(b, "render_lines")
        drawn_footer = _count_calls(screen.query_one(Footer), "render_lines")
        a.set_rows([(("cpu", "$frank-idle"), (" 97%", "")), *ROWS[1:]])
        await pilot.pause(0.2)
        assert len(drawn_a) >= 1
        assert drawn_b == [] and drawn_footer == []  # Textual's own compositor renders both again
        assert "97%" in a.text


async def test_the_dashboards_cpu_pool_shows_each_new_sample(make_app):
    """The line-drawn CPU panel still follows the telemetry, sample by sample."""
    app = make_app(status=READY)
    async with app.run_test(size=(120, 36)) as pilot:
        panel = app.screen.query_one(CpuPanel)
        assert await wait_until(pilot, lambda: "all" in panel.text)
        before = panel.text
        app.services.sampler.advance()
        assert await wait_until(pilot, lambda: panel.text != before)
        assert panel.border_subtitle == "64 cores" and "exl3-cpu-0" in panel.markup_text


class _Keys:
    """What the driver needs of an app: somewhere to post what it read (on the test's loop)."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    async def _post_message(self, message) -> None:
        if isinstance(message, events.Key):
            self.keys.append(message.key)

    def call_later(self, *args) -> None:
        raise AssertionError(f"the input thread failed: {args}")


async def _until(predicate, timeout_s: float = 2.0) -> bool:
    for _ in range(int(timeout_s / 0.02)):
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()


async def test_the_input_thread_sleeps_while_no_key_comes_and_still_reads_keys_escape_and_stops_at_once():
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTSTP, signal.SIGCONT)}
    master, slave = os.openpty()
    tty.setraw(slave)  # as the driver's application mode sets it: bytes arrive without a newline
    app = _Keys()
    try:
        driver = QuietLinuxDriver(app, size=(80, 24))  # type: ignore[arg-type]
        driver.fileno = slave
        thread = threading.Thread(target=driver.run_input_thread, daemon=True)
        thread.start()
        await asyncio.sleep(1.0)
        assert driver.input_wakeups <= 1  # Textual's own thread wakes ten times a second
        os.write(master, b"q")
        assert await _until(lambda: app.keys == ["q"])
        os.write(master, b"\x1b")  # a lone escape becomes the escape key once the parser's timeout passes
        assert await _until(lambda: app.keys == ["q", "escape"])
        t0 = time.monotonic()
        driver.exit_event.set()
        thread.join(2.0)
        assert not thread.is_alive() and time.monotonic() - t0 < 0.5
        driver.close()
    finally:
        os.close(master)
        os.close(slave)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


async def test_the_started_console_keeps_its_heap_out_of_full_collections_until_it_ends(make_app):
    import gc

    app = make_app(status=READY)
    assert gc.get_freeze_count() == 0
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_until(pilot, lambda: gc.get_freeze_count() > 0)  # after the first sample is drawn
        frozen = gc.get_freeze_count()
        app.services.sampler.advance()
        await pilot.pause(0.2)
        assert gc.get_freeze_count() <= frozen  # once, not per sample (frozen objects freed since drop out)
    assert gc.get_freeze_count() == 0  # given back when the app ends


def test_the_engine_uptime_reads_in_whole_minutes_below_an_hour():
    """The engine panel is drawn again only when its text changes: every few seconds no more."""
    from frank.console.widgets.engine_panel import uptime_text

    assert [uptime_text(s) for s in (None, 42.7, 59.9, 60.0, 318.0, 323.0, 3599.0, 3725.0)] == [
        "–",
        "42 s",
        "59 s",
        "1 min",
        "5 min",
        "5 min",
        "59 min",
        "1h02m",
    ]
