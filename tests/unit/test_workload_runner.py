"""The replay runner's pure parts: request bodies per mode, per-draw totals, the results file, first tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frank.errors import FrankError
from frank.workloads.format import load_workload, write_workload
from frank.workloads.record import draw_totals
from frank.workloads.replay import (
    _TOKEN,
    RESTART,
    ReplayOptions,
    ReplayRunner,
    ids_sha256,
    read_records,
    resolve_run_dir,
)


@pytest.fixture
def workload(tmp_path: Path):
    body = {
        "model": "recorded",
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": 500,
        "max_completion_tokens": 400,
        "stream": False,
        "temperature": 1.0,
    }
    recs = [
        {"id": f"r{i}", "task": "t", "episode": "e", "turn": i + 1, "offset_s": 0.0, "body": body} for i in range(3)
    ]
    return load_workload(write_workload(tmp_path / "wl", "wl", "", [("d", recs)]))


def test_engine_mode_asks_for_one_token_in_a_fresh_namespace(workload, tmp_path):
    runner = ReplayRunner(workload, "http://x", ReplayOptions(), tmp_path / "run")
    req = workload.requests["d"][0]
    body = runner._body(req, "served", "salt-1")
    assert body["model"] == "served" and body["cache_salt"] == "salt-1"
    assert body["max_tokens"] == 1 and "max_completion_tokens" not in body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["return_token_ids"] is True and body["temperature"] == 1.0
    assert req.body["model"] == "recorded" and req.body["max_tokens"] == 500  # the recording is untouched
    body = ReplayRunner(workload, "http://x", ReplayOptions(stream=False, token_ids=False))._body(req, "m", "s")
    assert body["stream"] is False and "stream_options" not in body and "return_token_ids" not in body


def test_engine_mode_with_output_tokens_is_greedy_and_hashes_what_came_back(workload):
    from frank.workloads.replay import _Response, output_sha256

    req = workload.requests["d"][0]
    body = ReplayRunner(workload, "http://x", ReplayOptions(output_tokens=4))._body(req, "m", "s")
    assert (body["max_tokens"], body["temperature"]) == (4, 0.0)  # greedy: two starts must agree
    with pytest.raises(FrankError, match="output tokens 0"):
        ReplayOptions(output_tokens=0)
    out = _Response(status=200)
    for chunk in (
        {"choices": [{"delta": {"content": "Hel"}, "token_ids": [7, 8]}]},
        {"choices": [{"delta": {"content": "lo"}, "token_ids": [9], "finish_reason": "length"}]},
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}},
    ):
        ReplayRunner._on_payload(chunk, out)
    assert ("".join(out.text), out.output_ids, out.finish_reason) == ("Hello", [7, 8, 9], "length")
    same = output_sha256("Hello", [7, 8, 9], "length")
    assert output_sha256("".join(out.text), out.output_ids, out.finish_reason) == same
    assert len({same, output_sha256("Hello", [7, 8, 10], "length"), output_sha256("Hello", [7, 8, 9], "stop")}) == 3


def test_full_mode_streams_the_recorded_parameters_with_an_optional_cap(workload):
    req = workload.requests["d"][0]
    body = ReplayRunner(workload, "http://x", ReplayOptions(mode="full"))._body(req, "m", "s")
    assert (body["max_tokens"], body["max_completion_tokens"], body["stream"]) == (500, 400, True)
    body = ReplayRunner(workload, "http://x", ReplayOptions(mode="full", max_tokens=16))._body(req, "m", "s")
    assert (body["max_tokens"], body["max_completion_tokens"]) == (16, 16)


def test_options_are_validated():
    with pytest.raises(FrankError, match="--mode"):
        ReplayOptions(mode="fast")
    with pytest.raises(FrankError, match="--limit"):
        ReplayOptions(limit=0)


def _rec(rid: str, turn: int = 2, status: str = "ok", attributed: bool = True, **server) -> dict:
    s = {
        "attributed": attributed,
        "ttft_s": 1.0,
        "queue_s": 0.1,
        "prefill_s": 0.6,
        "decode_s": 0.4,
        "front_end_s": 0.3,
        "drafted_steps": 4.0,
        "decode_steps": 5.0,
        "accepted_tokens": 6.0,
        "cached_tokens": 100.0,
        **server,
    }
    return {
        "id": rid,
        "turn": turn,
        "status": status,
        "client": {"ttft_s": 1.01, "total_s": 1.5},
        "server": s if status == "ok" else None,
        "prompt_tokens": 1000,
        "prompt_ids_sha256": f"h{rid}",
    }


def test_draw_totals_use_the_latest_record_and_skip_unattributed_server_values():
    records = [_rec("a", turn=1), _rec("b", status="failed"), _rec("b"), _rec("c", attributed=False)]
    t = draw_totals("d", ["a", "b", "c", "d"], records)
    assert (t.planned, t.requests, t.ok, t.failed, t.unattributed, t.complete) == (4, 3, 3, 0, 1, False)
    assert t.front_end_s == pytest.approx(0.6) and t.ttft_s == pytest.approx(2.0)  # a and b only
    assert t.client_ttft_s == pytest.approx(3.03)
    assert t.verify_step_s == pytest.approx(0.8 / 10.0) and t.acceptance_length == pytest.approx(1 + 12 / 8)
    assert (t.cold_requests, t.cold_front_end_s) == (1, pytest.approx(0.3))
    assert t.prompt_ids_sha256 is None  # "d" has no record
    full = draw_totals("d", ["a", "b"], records)
    assert full.complete and full.prompt_ids_sha256 is not None
    assert draw_totals("d", ["a", "b"], records[:2]).failed == 1


def test_a_record_written_with_the_old_name_for_drafted_steps_reads_the_same():
    new = _rec("a")
    old = {**new, "server": {("verify_steps" if k == "drafted_steps" else k): v for k, v in new["server"].items()}}
    assert "verify_steps" in old["server"] and "drafted_steps" not in old["server"]
    assert draw_totals("d", ["a"], [old]) == draw_totals("d", ["a"], [new])
    assert draw_totals("d", ["a"], [old]).drafted_steps == 4.0


def test_draw_totals_say_not_available_for_a_measure_the_engine_does_not_export():
    # llama.cpp's records: attributed (its own timings), but no queue time and so no front-end time
    records = [_rec(rid, turn=1 if rid == "a" else 2, queue_s=None, front_end_s=None) for rid in ("a", "b")]
    t = draw_totals("d", ["a", "b"], records)
    assert (t.queue_s, t.front_end_s, t.cold_front_end_s) == (None, None, None)
    assert t.prefill_s == pytest.approx(1.2) and t.ok == 2
    some = draw_totals("d", ["a", "b"], [records[0], _rec("b", queue_s=0.0, front_end_s=0.0)])
    assert (some.queue_s, some.front_end_s) == (None, None)  # one request lacks it: no total for the draw
    zeros = [_rec(rid, turn=1 if rid == "a" else 2, queue_s=0.0, front_end_s=0.0) for rid in ("a", "b")]
    every = draw_totals("d", ["a", "b"], zeros)
    assert (every.queue_s, every.front_end_s, every.cold_front_end_s) == (0.0, 0.0, 0.0)  # a real 0 stays 0


def test_results_file_keeps_everything_but_counts_from_the_last_restart(tmp_path):
    path = tmp_path / "d.jsonl"
    lines = [json.dumps(_rec("a")), json.dumps({"id": RESTART}), json.dumps(_rec("b")), '{"id": "torn']
    path.write_text("\n".join(lines))
    assert [r["id"] for r in read_records(path)] == ["b"]
    assert [r["id"] for r in read_records(path, current=False)] == ["a", "b"]


def test_first_token_scan():
    role = (
        b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],'
        b'"prompt_token_ids":[1,2,3]}'
    )
    assert not _TOKEN.search(role)
    assert _TOKEN.search(b'data: {"choices":[{"delta":{"content":"ov"},"finish_reason":"length"}]}')
    assert _TOKEN.search(b'data: {"choices":[{"delta":{"content":""},"token_ids":[7]}]}')
    assert _TOKEN.search(b'data: {"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}')


def test_ids_hash_and_run_lookup(tmp_path, fresh_frank_home):
    assert ids_sha256([1, 22, 3]) == ids_sha256((1, 22, 3)) != ids_sha256([12, 2, 3])
    with pytest.raises(FrankError, match="no replay run"):
        resolve_run_dir("nope")


def test_list_runs_newest_first(tmp_path):
    import os

    from frank.workloads.catalog import list_runs
    from frank.workloads.replay import RUN_FILE, SUMMARY_FILE

    for i, name in enumerate(("old", "new")):
        (tmp_path / name).mkdir()
        (tmp_path / name / RUN_FILE).write_text(json.dumps({"run_id": name}))
        os.utime(tmp_path / name / RUN_FILE, (1000 + i, 1000 + i))
    (tmp_path / "new" / SUMMARY_FILE).write_text(json.dumps({"run_id": "new", "state": "finished"}))
    runs = list_runs(tmp_path)
    assert [(r["run_id"], r["state"]) for r in runs] == [("new", "finished"), ("old", "unknown")]


def test_resume_with_restart_starts_unfinished_draws_over_and_keeps_the_old_records(workload, tmp_path):
    import hashlib
    from dataclasses import asdict

    from frank.workloads.replay import RUN_FILE, resume_replay

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    meta = {
        "run_id": "run",
        "attempts": 1,
        "base_url": "http://127.0.0.1:9",
        "workload": {
            "name": "wl",
            "path": str(workload.path),
            "manifest_sha256": hashlib.sha256(workload.manifest_path.read_bytes()).hexdigest(),
        },
        "options": {k: v for k, v in asdict(ReplayOptions()).items() if k != "api_key"},
        "draws": ["d"],
    }
    (run_dir / RUN_FILE).write_text(json.dumps(meta))
    (run_dir / "d.jsonl").write_text(json.dumps(_rec("r0")) + "\n")
    runner = resume_replay(run_dir)
    assert runner.run_id == "run" and runner.base_url == "http://127.0.0.1:9"
    assert [r["id"] for r in read_records(runner.draw_file("d"))] == ["r0"]  # plain resume: r0 is done
    resume_replay(run_dir, restart=True)
    assert read_records(runner.draw_file("d")) == []  # the draw starts over ...
    assert [r["id"] for r in read_records(runner.draw_file("d"), current=False)] == ["r0"]  # ... nothing lost


def test_a_draw_that_spans_a_live_knob_flip_says_where():
    off, on = {"region_cache": "off"}, {"region_cache": "on"}
    records = [
        {**_rec("a", turn=1), "index": 0, "live_knobs": off},
        {**_rec("b"), "index": 1, "live_knobs": off, "live_knobs_end": on},  # flipped while it ran
        {**_rec("c"), "index": 2, "live_knobs": on},
        {**_rec("d"), "index": 3, "live_knobs": off},  # flipped back between two requests
    ]
    t = draw_totals("d", ["a", "b", "c", "d"], records)
    assert [(f.name, f.old, f.new, f.request, f.during) for f in t.knob_flips] == [
        ("region_cache", "off", "on", "b", True),
        ("region_cache", "on", "off", "d", False),
    ]
    assert t.knob_flips[0].describe() == "region_cache off → on at b, during it"
    steady = draw_totals("d", ["a", "c"], [records[0], {**records[2], "live_knobs": off}])
    assert steady.knob_flips == ()
    unknown = draw_totals("d", ["a", "b"], [_rec("a"), _rec("b")])  # records of an engine not this user's
    assert unknown.knob_flips == ()
    # the summary's JSON holds them, and the console reads them back
    from dataclasses import asdict

    from frank.workloads.record import KnobFlip

    assert KnobFlip.from_json(json.loads(json.dumps(asdict(t)))["knob_flips"][1]) == t.knob_flips[1]


def test_live_knobs_are_read_from_this_users_engine_record(fresh_frank_home):
    from dataclasses import replace

    from frank.engine.controller import EngineController
    from frank.engine.records import EngineRecord
    from frank.workloads.replay import EngineAt, LiveKnobs

    files = EngineController().files
    record = EngineRecord(profile="embedded-cpu", knobs={"region_cache": "off"}, started_at=100.0)
    files.write_record(record)
    live = LiveKnobs(EngineAt("embedded-cpu", dict(record.knobs), 42, 100.0))
    start = live.read()
    assert start == {"region_cache": "off", "detok_tail": "off", "held_prompt": "off"}  # the profile's live knobs
    assert live.changed(start) is None
    files.write_record(replace(record, knobs={"region_cache": "on"}))  # `c` in the console
    assert live.changed(start) == {**start, "region_cache": "on"}
    files.write_record(replace(record, started_at=200.0))  # another start: not the engine the run began on
    assert live.read() is None
    assert LiveKnobs(None).read() is None  # not this user's engine
