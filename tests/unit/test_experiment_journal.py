from __future__ import annotations

import json
from pathlib import Path

import pytest

from frank.experiments.journal import Journal, read_events
from frank.jsonl import JsonlError


def test_append_read_and_sequence(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.append("registered", run_id="r1")
        j.append("cell_started", slot=0, attempt=1)
    with Journal(path) as j:  # a second writer continues the sequence
        j.append("cell_done", slot=0, attempt=1, value=1.5)
    events = read_events(path)
    assert [e["event"] for e in events] == ["registered", "cell_started", "cell_done"]
    assert [e["seq"] for e in events] == [1, 2, 3]
    assert events[2]["value"] == 1.5 and events[0]["t"].endswith("Z")
    assert oct(path.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("tail", [b'{"seq":3,"event":"cell_do', b'{"seq":3,"event":"cell_done"', b"\x00\x00"])
def test_torn_last_line_is_skipped_then_kept_aside(tmp_path: Path, tail: bytes) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.append("a")
        j.append("b")
    with open(path, "ab") as fh:
        fh.write(tail)  # a writer killed mid-line
    assert [e["event"] for e in read_events(path)] == ["a", "b"]
    with Journal(path) as j:
        j.append("c")
    assert [e["event"] for e in read_events(path)] == ["a", "b", "c"]
    torn = [json.loads(line) for line in (tmp_path / "journal.torn").read_text().splitlines()]
    assert torn[0]["bytes"] == tail.decode(errors="replace")


def test_damage_before_the_end_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        for name in "abc":
            j.append(name)
    lines = path.read_text().splitlines()
    lines[1] = "not json"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(JsonlError, match=rf"{path}:2: damaged line \(bad JSON"):
        read_events(path)


def test_missing_journal_reads_empty(tmp_path: Path) -> None:
    assert read_events(tmp_path / "none.jsonl") == []
