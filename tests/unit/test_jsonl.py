"""frank.jsonl, the one reader and writer of append-only record files: a torn last line is skipped and kept
aside by the next writer, damage anywhere else names file:line, concurrent writers never interleave, and
every record file of frank reads through it."""

from __future__ import annotations

import json
import multiprocessing
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from frank import jobs, jsonl, paths
from frank.campaign.ledger import read_history
from frank.episodes.runner import read_jsonl
from frank.experiments.journal import read_events
from frank.workloads.replay import default_runs_root, read_records

pytestmark = pytest.mark.usefixtures("job_kinds")

TWO = b'{"id": "a", "event": "x"}\n{"id": "b", "event": "y"}\n'


def test_missing_file_reads_empty(tmp_path: Path) -> None:
    assert jsonl.read(tmp_path / "none.jsonl") == []


@pytest.mark.parametrize(
    "tail",
    [
        b'{"id": "c", "ev',  # killed mid-record
        b"\x00\x00\x00",  # a crash that left zeroed blocks
        b'{"id": "c", "event": "z"}',  # the whole object but not its newline: not a record yet
        b"\xff\xfe",  # not UTF-8
    ],
)
def test_a_torn_last_line_is_skipped(tmp_path: Path, tail: bytes) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(TWO + tail)
    assert [r["id"] for r in jsonl.read(path)] == ["a", "b"]
    records, whole = jsonl.parse(path.read_bytes(), path)
    assert len(records) == 2 and whole == len(TWO)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b'{"id": "x", "ev', r"bad JSON: .* at column"),
        (b'{"a": "\xc3\x28"}', "not UTF-8 text"),
        (b"[1, 2]", "JSON list, not an object"),
        (b"42", "JSON int, not an object"),
    ],
)
def test_a_damaged_line_before_the_end_names_file_and_line(tmp_path: Path, line: bytes, why: str) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"id": "a"}\n\n' + line + b'\n{"id": "b"}\n')
    with pytest.raises(jsonl.JsonlError, match=rf"^{path}:3: damaged line \({why}"):
        jsonl.read(path)


def test_a_damaged_last_line_with_its_newline_is_damage_not_a_tear(tmp_path: Path) -> None:
    # one write per record: a kill leaves a prefix without the newline; a bad line that has one is damage
    path = tmp_path / "r.jsonl"
    path.write_bytes(TWO + b'{"id": "c", "ev\n')
    with pytest.raises(jsonl.JsonlError, match=rf"{path}:3: damaged line"):
        jsonl.read(path)


def test_parse_numbers_lines_from_where_it_starts(tmp_path: Path) -> None:
    with pytest.raises(jsonl.JsonlError, match=r"f.jsonl:12: damaged line"):
        jsonl.parse(b'{"a": 1}\nnope\n', "f.jsonl", first_line=11)


def test_append_keeps_a_torn_tail_aside_and_writes_after_the_last_whole_record(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    jsonl.append(path, {"id": "a"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with open(path, "ab") as fh:
        fh.write(b'{"id": "tor')  # a writer killed mid-line
    jsonl.append(path, {"id": "b", "when": Path("/x")})  # default=str
    assert jsonl.read(path) == [{"id": "a"}, {"id": "b", "when": "/x"}]
    kept = [json.loads(line) for line in jsonl.torn_path(path).read_text().splitlines()]
    assert kept[0]["bytes"] == '{"id": "tor' and kept[0]["offset"] == len(b'{"id": "a"}\n')
    assert path.read_bytes().endswith(b'{"id": "b", "when": "/x"}\n')
    with pytest.raises(ValueError, match="one line"):
        jsonl.append(path, {"id": "c"}, indent=2)


def test_heal_leaves_a_whole_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(TWO)
    assert jsonl.heal(path) == len(TWO) and path.read_bytes() == TWO
    assert not jsonl.torn_path(path).exists()


def _writer(path: str, tag: str, count: int) -> None:
    for i in range(count):
        jsonl.append(Path(path), {"tag": tag, "i": i, "pad": "x" * 5000})  # > a pipe buffer: still one line


def test_concurrent_writers_never_interleave_or_eat_each_others_records(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), tag, 60)) for tag in "ab"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    records = jsonl.read(path)
    for tag in "ab":
        assert [r["i"] for r in records if r["tag"] == tag] == list(range(60))
    assert not jsonl.torn_path(path).exists()


# -- every record file of frank reads through it --------------------------------------------------------


def _follow(path: Path) -> list[dict]:
    run_dir = paths.private_dir(default_runs_root() / "20261201-000000-w01-mini-engine-abcd")
    jobs.write_job_file(run_dir, "replay", None, planned=3)
    target = run_dir / "draw-1.jsonl"
    target.write_bytes(path.read_bytes())
    return jobs.Follower(run_dir.name).poll()[1]


READERS: dict[str, Callable[[Path], list[dict]]] = {
    "campaign history": read_history,
    "replay results": read_records,
    "episode records": read_jsonl,
    "experiment journal": read_events,
    "job follower": _follow,
}


@pytest.mark.parametrize("reader", READERS.values(), ids=READERS.keys())
def test_every_record_reader_skips_a_torn_tail_and_names_damage(
    reader: Callable[[Path], list[dict]], tmp_path: Path, fresh_frank_home: Path
) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(TWO + b'{"id": "c", "eve')
    assert [r["id"] for r in reader(path)] == ["a", "b"]
    path.write_bytes(b'{"id": "a", "event": "x"}\n{"id": "b", "eve\n{"id": "c", "event": "z"}\n')
    with pytest.raises(jsonl.JsonlError, match=r"\.jsonl:2: damaged line"):
        reader(path)


def test_the_follower_numbers_lines_of_a_big_file_it_only_tails(tmp_path: Path, fresh_frank_home: Path) -> None:
    run_dir = paths.private_dir(default_runs_root() / "20261201-000000-w01-mini-engine-big0")
    jobs.write_job_file(run_dir, "replay", None, planned=3)
    path = run_dir / "draw-1.jsonl"
    line = json.dumps({"id": "r", "pad": "x" * 1000}).encode() + b"\n"
    path.write_bytes(line * 2000 + b"not json\n")  # 2 MB: the follower reads only the last 1 MiB
    with pytest.raises(jsonl.JsonlError, match=r"draw-1\.jsonl:2001: damaged line"):
        jobs.Follower(run_dir.name).poll()
