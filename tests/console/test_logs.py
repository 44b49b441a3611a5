"""The fast log view: a 100K-line log is indexed once, read by visible lines through an LRU cache, and
searched with a regex; the Logs screen follows the end and jumps to matches."""

from __future__ import annotations

import dataclasses
import time

from frank.console.screens.logs import LogsScreen
from frank.console.widgets.log_view import CACHE_LINES, LogIndex, LogView
from tests.console.conftest import READY, wait_until


def write_log(path, lines: int) -> None:
    with open(path, "w") as fh:
        for i in range(lines):
            level = "ERROR" if i % 25_000 == 24_999 else "INFO"
            fh.write(
                f"{level} 11-30 04:{i // 3600 % 60:02d}:{i % 60:02d} [loggers.py:123] line {i} "
                f"throughput {i * 7 % 1000} tokens/s\n"
            )


def test_index_reads_lines_and_grows(tmp_path):
    log = tmp_path / "engine.log"
    write_log(log, 100_000)
    index = LogIndex(log)
    t0 = time.perf_counter()
    assert index.refresh()
    index_s = time.perf_counter() - t0
    assert index.line_count == 100_000
    assert index.line(0).startswith("INFO") and index.line(0).endswith("tokens/s")
    assert "line 99999 " in index.line(99_999)
    assert index.line(100_000) == ""
    with open(log, "a") as fh:
        fh.write("partial")  # no newline yet: not a line
    assert not index.refresh()
    with open(log, "a") as fh:
        fh.write(" line\n")
    assert index.refresh() and index.line(100_000) == "partial line"
    print(f"indexed 100K lines in {index_s * 1000:.0f} ms")


def test_cache_is_bounded(tmp_path):
    log = tmp_path / "engine.log"
    write_log(log, CACHE_LINES * 2)
    index = LogIndex(log)
    index.refresh()
    for i in range(CACHE_LINES * 2):
        index.line(i)
    assert len(index._cache) == CACHE_LINES
    assert (CACHE_LINES * 2 - 1) in index._cache and 0 not in index._cache


def test_search_wraps_both_ways_and_accepts_plain_text(tmp_path):
    log = tmp_path / "engine.log"
    write_log(log, 100_000)
    index = LogIndex(log)
    index.refresh()
    assert index.search("^ERROR", 0) == 24_999
    assert index.search("^ERROR", 24_999) == 49_999
    assert index.search("^error", 99_999) == 24_999  # wraps, case-insensitive
    assert index.search("^ERROR", 24_999, backwards=True) == 99_999  # wraps backwards
    assert index.search("line 5 [", 0) is None  # invalid regex: searched as text
    assert index.search("no such text anywhere", 0) is None


def test_rotated_log_is_reindexed(tmp_path):
    log = tmp_path / "engine.log"
    write_log(log, 1000)
    index = LogIndex(log)
    index.refresh()
    log.unlink()
    write_log(log, 10)
    index.refresh()
    assert index.line_count == 10


async def test_logs_screen_follows_and_searches_a_100k_line_log(make_app, tmp_path):
    log = tmp_path / "engine.log"
    write_log(log, 100_000)
    app = make_app(status=dataclasses.replace(READY, log_path=str(log)))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("4")
        for _ in range(50):
            await pilot.pause(0.05)
            if app.screen.query_one(LogView).index.line_count == 100_000:
                break
        screen = app.screen
        assert isinstance(screen, LogsScreen)
        view = screen.query_one(LogView)
        assert view.index.line_count == 100_000
        # at the end (the scroll lands a refresh after the index is complete: wait for it, don't sleep)
        assert await wait_until(pilot, lambda: view.follow and view.scroll_offset.y >= 100_000 - view.size.height, 5)
        await pilot.press("g")  # to the top: a search goes forward from the view
        await pilot.pause(0.1)
        assert not view.follow and view.scroll_offset.y == 0
        await pilot.press("slash")
        await pilot.press(*"^ERROR")
        t0 = time.perf_counter()
        await pilot.press("enter")
        for _ in range(50):
            await pilot.pause(0.05)
            if view.match_line is not None:
                break
        assert view.match_line == 24_999 and not view.follow
        assert view.scroll_offset.y <= 24_999 <= view.scroll_offset.y + view.size.height
        print(f"search + jump: {(time.perf_counter() - t0) * 1000:.0f} ms")
        await pilot.press("n")
        for _ in range(50):
            await pilot.pause(0.05)
            if view.match_line == 49_999:
                break
        assert view.match_line == 49_999
        await pilot.press("G")
        await pilot.pause(0.1)
        assert view.follow
