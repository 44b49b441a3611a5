"""A full disk loses nothing: on a small tmpfs filled up, every record writer (frank.jsonl, under the
replay records, the episode records and the campaign history; paths.write_private, under the engine's
state files and the jobs' files) refuses the write naming the file, keeps every line or byte
already written, leaves no torn line or temp file, and takes the next write once space is back. Each write
on the full disk is an attempt that must fail, for the right reason."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from frank import jsonl, paths
from frank.errors import WriteError
from frank.jobs.job_file import JobFile, rewrite_job_file
from tests.full_disk import fill, tmpfs


@pytest.fixture
def disk(tmp_path: Path):
    with tmpfs(tmp_path / "disk", "256k") as mount:
        yield mount


def test_a_record_on_a_full_disk_is_refused_whole_and_the_records_before_it_stay(disk):
    journal = disk / "journal.jsonl"
    for i in range(20):
        jsonl.append(journal, {"event": "cell", "i": i, "pad": "x" * 100})
    before = journal.read_bytes()
    filler = fill(disk)
    for size in (5000, 100_000):  # past the last page the file holds: cut off part-way, or not written at all
        with pytest.raises(WriteError, match=rf"{journal}: cannot append a record: No space left on device"):
            jsonl.append(journal, {"event": "cell", "pad": "y" * size})
        assert journal.read_bytes() == before  # nothing torn onto the end, nothing before it lost
    assert not jsonl.torn_path(journal).exists()
    filler.unlink()
    jsonl.append(journal, {"event": "cell", "i": 20})  # resumes once space is back
    assert [r.get("i") for r in jsonl.read(journal)] == list(range(21))


def test_a_state_file_on_a_full_disk_keeps_what_it_held(disk):
    state = disk / "engine.json"
    paths.write_private(state, json.dumps({"state": "ready"}))
    job = disk / "job"
    job.mkdir()
    rewrite_job_file(job, JobFile(run_id="r1", kind="replay", pid=41))
    filler = fill(disk)
    with pytest.raises(WriteError, match=rf"{state}: cannot write: No space left on device"):
        paths.write_private(state, json.dumps({"state": "stopped", "pad": "z" * 100_000}))
    with pytest.raises(WriteError, match=r"job\.json: cannot write: No space left on device"):
        rewrite_job_file(job, JobFile(run_id="r1", kind="replay", pid=42, error="z" * 100_000))
    assert json.loads(state.read_text()) == {"state": "ready"}
    assert json.loads(next(job.iterdir()).read_text())["pid"] == 41
    assert sorted(p.name for p in disk.iterdir()) == ["engine.json", "filler", "job"]  # no temp file left
    filler.unlink()
    paths.write_private(state, json.dumps({"state": "stopped"}))
    assert json.loads(state.read_text()) == {"state": "stopped"} and os.stat(state).st_mode & 0o777 == 0o600


def test_the_experiment_journal_on_a_full_disk_refuses_the_event_whole_and_goes_on_after(disk):
    """The runner's journal (frank.experiments.journal.Journal, one writer per run): an event that does not
    fit is cut back, named, not counted; every event before it stays; the next one takes its number."""
    from frank.experiments.journal import Journal, read_events

    path = disk / "journal.jsonl"
    with Journal(path) as journal:
        for i in range(5):
            journal.append("cell_done", slot=i, pad="x" * 100)
        before = path.read_bytes()
        filler = fill(disk)
        with pytest.raises(WriteError, match=rf"{path}: cannot append a record: No space left on device"):
            journal.append("cell_done", slot=5, pad="y" * 300_000)
        assert path.read_bytes() == before and journal.seq == 5
        filler.unlink()
        journal.append("runner_stopped", reason="finished")
    events = read_events(path)
    assert [e["seq"] for e in events] == [1, 2, 3, 4, 5, 6] and events[-1]["event"] == "runner_stopped"
    assert not jsonl.torn_path(path).exists()
