"""The workload format: writing, checking (every bad line as file:line: reason), loading, importing."""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path

import pytest

from frank.console.cli import main
from frank.errors import FrankError
from frank.workloads.format import (
    DrawFile,
    DrawWriter,
    check_workload,
    import_jsonl,
    load_workload,
    manifest_text,
    read_manifest,
    write_workload,
)


def body(*contents: str) -> dict:
    msgs = [{"role": "system", "content": "sys"}]
    for i, c in enumerate(contents):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": c})
    return {"model": "m", "messages": msgs, "max_tokens": 8}


def rec(i: int, turn: int = 1, **extra) -> dict:
    return {
        "id": f"r{i}",
        "task": "t",
        "episode": f"e{i}",
        "turn": turn,
        "offset_s": float(i),
        "body": body(f"q{i}"),
        **extra,
    }


@pytest.fixture
def good(tmp_path: Path) -> Path:
    return write_workload(
        tmp_path / "wl", "wl", "a test workload", [("d1", [rec(1), rec(2)]), ("d2", [rec(3)])], {"source": "test"}
    )


def test_written_workload_checks_and_loads(good: Path):
    workload, errors = check_workload(good)
    assert errors == []
    assert workload.draw_names == ["d1", "d2"]
    assert workload.total_requests == 3
    loaded = load_workload(good)
    assert [r.id for r in loaded.requests["d1"]] == ["r1", "r2"]
    assert loaded.requests["d2"][0].body["messages"][1]["content"] == "q3"
    assert loaded.requests["d1"][1].line == 2
    assert loaded.meta == {"source": "test"}
    # the manifest's sha256 is the draw file's
    d1 = read_manifest(good).draw("d1")
    assert d1.sha256 == hashlib.sha256((good / "d1.jsonl").read_bytes()).hexdigest()
    assert (good / "d1.jsonl").stat().st_mode & 0o077 == 0  # recordings are private


def test_manifest_text_is_valid_toml_with_awkward_strings():
    text = manifest_text(
        'we"ird\nname',
        "café \\ ✓",
        [DrawFile("d", "d.jsonl", "0" * 64, 3)],
        {"seed": 7, "ok": True, "files": ["a", "b"], "x": 0.5},
    )
    data = tomllib.loads(text)
    assert data["name"] == 'we"ird\nname' and data["description"] == "café \\ ✓"
    assert data["draws"][0]["requests"] == 3 and data["meta"]["files"] == ["a", "b"]


def test_every_bad_line_is_reported_with_file_and_line(good: Path):
    lines = [
        json.dumps(rec(1)),
        "{not json",
        json.dumps({k: v for k, v in rec(2).items() if k != "task"}),
        json.dumps(rec(3, turn="two")),
        json.dumps(dict(rec(4), body={"model": "m"})),
        json.dumps(dict(rec(5), body={"messages": [{"role": "wizard", "content": "x"}]})),
        json.dumps(dict(rec(6), body={"messages": [{"role": "tool", "content": "out"}]})),
        json.dumps(rec(1)),  # duplicate id
        "",
        json.dumps(dict(rec(9), offset_s=-1)),
        json.dumps([1, 2]),
        json.dumps(dict(rec(10), body=dict(body("x"), max_tokens=0, temperature="hot"))),
    ]
    (good / "d1.jsonl").write_text("\n".join(lines) + "\n")
    workload, errors = check_workload(good)
    by_line = {}
    for e in errors:
        by_line.setdefault((e.path.name, e.line), []).append(e.reason)
    d1 = good / "d1.jsonl"
    assert str(errors[0]).startswith(f"{good / 'workload.toml'}:")  # the sha256 no longer matches
    assert "sha256 mismatch" in errors[0].reason
    assert any("manifest says 2 requests" in e.reason for e in errors)
    assert "bad JSON" in by_line[("d1.jsonl", 2)][0]
    assert by_line[("d1.jsonl", 3)] == ["missing field 'task'"]
    assert by_line[("d1.jsonl", 4)] == ["field 'turn': expected integer, got string"]
    assert by_line[("d1.jsonl", 5)] == ["body: missing field 'messages'"]
    assert by_line[("d1.jsonl", 6)] == ["body.messages[0].role: unknown role 'wizard'"]
    assert "tool_call_id" in by_line[("d1.jsonl", 7)][0]
    assert "duplicate id 'r1' (first at d1.jsonl:1)" in by_line[("d1.jsonl", 8)][0]
    assert by_line[("d1.jsonl", 9)] == ["blank line"]
    assert "offset_s" in by_line[("d1.jsonl", 10)][0]
    assert by_line[("d1.jsonl", 11)] == ["expected a JSON object, got array"]
    assert len(by_line[("d1.jsonl", 12)]) == 2  # max_tokens and temperature
    assert ("d1.jsonl", 1) not in by_line
    assert all(str(e).startswith(f"{e.path}:{e.line}: ") for e in errors)
    assert str(d1) in "\n".join(map(str, errors))
    # a workload with any error is refused as a whole, with the errors listed
    with pytest.raises(FrankError, match="nothing was replayed") as info:
        load_workload(good)
    assert f"{d1}:2: bad JSON" in str(info.value)


def test_manifest_errors_name_the_manifest_line(good: Path):
    manifest = good / "workload.toml"
    text = manifest.read_text().replace("format_version = 1", "format_version = 9")
    text = text.replace('file = "d2.jsonl"', 'file = "missing.jsonl"')
    manifest.write_text(text)
    _, errors = check_workload(good)
    assert [str(e) for e in errors] == [f"{manifest}:2: format_version: 9 is newer than this frank reads (1)"]
    manifest.write_text(text.replace("format_version = 9", "format_version = 1"))
    _, errors = check_workload(good)
    line = text.splitlines().index('file = "missing.jsonl"') + 1
    assert [str(e) for e in errors] == [f"{manifest}:{line}: draw 'd2': file missing.jsonl is missing"]
    manifest.write_text("name = [unclosed\n")
    _, errors = check_workload(good)
    assert errors[0].line == 1 and "bad TOML" in errors[0].reason
    _, errors = check_workload(good / "nope")
    assert "no such directory" in errors[0].reason


def test_cli_check_prints_every_error_and_exits_non_zero(good: Path, capsys):
    assert main(["workload", "check", str(good)]) == 0
    assert "ok (2 draws, 3 requests)" in capsys.readouterr().out
    with open(good / "d2.jsonl", "a") as fh:
        fh.write("{broken\n")
    assert main(["workload", "check", str(good)]) == 1
    err = capsys.readouterr().err
    assert f"{good / 'd2.jsonl'}:2: bad JSON" in err
    assert "sha256 mismatch" in err and "3 error(s)" in err  # + the request count
    assert main(["workload", "check", str(good), "--json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["ok"] is False and len(payload["errors"]) == 3


def test_draw_writer_continues_a_torn_file(tmp_path: Path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(json.dumps(rec(1)).encode() + b"\n" + b'{"id": "torn')
    w = DrawWriter(path, "d")
    w.write(rec(2))
    w.close()
    lines = path.read_bytes().split(b"\n")
    assert lines[1] == b'{"id": "torn' and json.loads(lines[2])["id"] == "r2"
    assert w.draw_file().sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert w.draw_file().requests == 3


def test_import_groups_conversations_into_episodes(tmp_path: Path):
    src = tmp_path / "agent log.jsonl"
    a1, b1 = body("fix the bug"), body("write docs")
    a2 = body("fix the bug", "looking", "go on")
    lines = [
        a1,
        {"custom_id": "x", "method": "POST", "url": "/v1/chat/completions", "body": b1},
        {"request": a2, "timestamp": 100.0},
        body("fix the bug"),
    ]
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    out = import_jsonl([src], tmp_path / "imported")
    workload = load_workload(out)
    assert workload.draw_names == ["agent-log"]
    reqs = workload.requests["agent-log"]
    assert [(r.episode, r.turn, r.task) for r in reqs] == [
        ("agent-log-ep1", 1, "task-1"),
        ("agent-log-ep2", 1, "task-2"),
        ("agent-log-ep1", 2, "task-1"),
        ("agent-log-ep3", 1, "task-1"),
    ]  # the same opening again: a new episode of the same task
    assert reqs[2].body == a2


def test_import_reports_bad_lines_and_writes_nothing(tmp_path: Path):
    src = tmp_path / "log.jsonl"
    src.write_text(json.dumps(body("ok")) + "\nnot json\n" + json.dumps({"prompt": "completions"}) + "\n")
    with pytest.raises(FrankError) as info:
        import_jsonl([src], tmp_path / "out")
    assert f"{src}:2: bad JSON" in str(info.value)
    assert f"{src}:3: body: missing field 'messages'" in str(info.value)
    assert not (tmp_path / "out").exists()


def test_write_workload_refuses_to_overwrite(good: Path):
    with pytest.raises(FrankError, match="exists"):
        write_workload(good, "x", "", [("d", [rec(1)])])
