"""The dashboard's incremental log tail and its CPU heat strip (plain functions, no app)."""

from __future__ import annotations

import os
import re

from frank.console.log_follow import LogFollower
from frank.console.widgets.cpu_panel import heat_strip


def cells(row: str) -> list[str]:
    """The visible text of a markup row, split into its per-core cells."""
    return re.sub(r"\[[^\]]*\]", "", row).split()


def test_follower_reads_only_appended_lines_and_drops_our_polls(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text("one\ntwo\n")
    f = LogFollower(3)
    assert f.lines(log) == ["one", "two"]
    with open(log, "a") as h:
        h.write('INFO: 127.0.0.1:1 - "GET /metrics HTTP/1.1" 200 OK\nthree\nfour\nhalf')
    assert f.lines(log) == ["two", "three", "four"]  # the last 3; the poll line and the partial one left out
    with open(log, "a") as h:
        h.write(" done\n")
    assert f.lines(log) == ["three", "four", "half done"]


def test_follower_starts_over_after_rotation_or_truncation(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text("old-1\nold-2\n")
    f = LogFollower(5)
    assert f.lines(log) == ["old-1", "old-2"]
    os.replace(log, tmp_path / "engine.log.1")
    log.write_text("new-1\n")
    assert f.lines(log) == ["new-1"]
    log.write_text("")
    assert f.lines(log) == []
    assert f.lines(tmp_path / "missing.log") == []


def test_follower_first_read_starts_at_a_whole_line(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text("".join(f"line {i:06d}\n" for i in range(10000)))  # more than the first read's window
    lines = LogFollower(4).lines(log)
    assert lines == [f"line {i:06d}" for i in range(9996, 10000)]


def test_heat_strip_two_cores_are_two_wide_cells_with_their_numbers():
    rows = heat_strip((3.0, 97.0), 56)
    assert len(rows) == 2
    assert cells(rows[0]) == ["▁▁▁▁▁", "█████"]
    assert cells(rows[1]) == ["3%", "97%"]
    assert "$frank-idle" in rows[0] and "$frank-bad" in rows[0]


def test_heat_strip_many_cores_one_cell_each_in_even_rows_within_the_width():
    for n, width, n_rows in ((128, 58, 3), (128, 36, 4), (64, 58, 2), (32, 56, 1)):
        rows = heat_strip(tuple(float(i % 100) for i in range(n)), width)
        visible = [re.sub(r"\[[^\]]*\]", "", r) for r in rows]
        assert len(rows) == n_rows, (n, width)
        assert all(len(v) <= width for v in visible), (n, width)
        assert sum(len(v) for v in visible) == n  # one column per core
        assert max(map(len, visible)) - min(map(len, visible)) <= 1  # even rows
