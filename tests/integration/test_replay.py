"""The replay runner against the real embedded engine. Only prefixes of mini draws: a cold ~20K-token
prefill takes seconds on two shared cores, and the prefix cache makes the rest of a conversation cheap."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import httpx
import pytest

from frank.console.cli import main
from frank.engine.metrics import E2E, fetch_metrics, response_values
from frank.workloads.format import load_workload
from frank.workloads.record import start_measures, tallies_of
from frank.workloads.replay import ReplayOptions, read_records, resume_replay, start_replay
from frank.workloads.w01 import make_w01

pytestmark = pytest.mark.engine
PREFIX = 5


@pytest.fixture(scope="module")
def mini(tmp_path_factory) -> Path:
    return make_w01(tmp_path_factory.mktemp("w01") / "w01-mini", "mini", seed=1)


@pytest.fixture(scope="module")
def first_run(engine, mini, tmp_path_factory):
    events = []
    runner = start_replay(
        mini,
        engine.status().url,
        ReplayOptions(draws=("draw-1",), limit=PREFIX),
        out=tmp_path_factory.mktemp("runs") / "first",
        progress=events.append,
    )
    summary = runner.run_sync()
    return runner, summary, events


def test_every_request_has_attributed_server_values_and_totals_add_up(first_run, mini):
    runner, summary, events = first_run
    assert summary.state == "finished"
    records = read_records(runner.draw_file("draw-1"))
    expected = [r.id for r in load_workload(mini, ["draw-1"]).requests["draw-1"][:PREFIX]]
    assert [r["id"] for r in records] == expected  # recorded order, one line each
    for r in records:
        s, c = r["server"], r["client"]
        assert r["status"] == "ok" and s["attributed"], r
        assert s["front_end_s"] == pytest.approx(s["ttft_s"] - s["queue_s"] - s["prefill_s"])
        assert s["front_end_s"] > 0 and s["prefill_s"] > 0
        assert r["prompt_tokens"] == r["prompt_ids_count"] == s["prompt_tokens"] > 10_000
        assert len(r["prompt_ids_sha256"]) == 64
        assert r["completion_tokens"] == 1 and r["stream"] is True
        assert c["ttfb_s"] <= c["ttft_s"] <= c["total_s"]
        assert c["ttft_s"] >= s["ttft_s"] - 0.002  # the client's span contains the server's
    # a fresh salt: the first request finds nothing cached; the rest of its conversation hits the prefix
    assert records[0]["server"]["cached_tokens"] == 0
    assert all(r["server"]["cached_tokens"] > 10_000 for r in records[1:] if r["turn"] > 1)
    d = summary.to_json()["draws"]["draw-1"]
    assert (d["requests"], d["ok"], d["failed"], d["unattributed"], d["complete"]) == (PREFIX, PREFIX, 0, 0, True)
    for key in ("front_end_s", "prefill_s", "queue_s", "ttft_s"):
        assert d[key] == pytest.approx(sum(r["server"][key] for r in records))
    assert d["prompt_tokens"] == sum(r["prompt_tokens"] for r in records)
    assert d["cold_requests"] == sum(r["turn"] == 1 for r in records) >= 1
    assert json.loads((runner.run_dir / "summary.json").read_text())["draws"]["draw-1"] == d
    # progress: one request event and one result event per request, then the draw and the run
    phases = [e.phase for e in events]
    assert phases == ["started"] + ["request", "result"] * PREFIX + ["draw_done", "finished"]
    results = [e for e in events if e.phase == "result"]
    assert [e.done for e in results] == list(range(1, PREFIX + 1)) and results[-1].total == PREFIX
    assert results[-1].totals.front_end_s == pytest.approx(d["front_end_s"])


def test_a_new_run_gets_a_new_namespace_and_the_same_prompt_ids(engine, first_run, mini, tmp_path):
    runner, _, _ = first_run
    again = start_replay(
        mini, engine.status().url, ReplayOptions(draws=("draw-1",), limit=2, stream=False), out=tmp_path / "again"
    )
    summary = again.run_sync()
    first = read_records(runner.draw_file("draw-1"))
    second = read_records(again.draw_file("draw-1"))
    assert summary.state == "finished" and second[0]["salt"] != first[0]["salt"]
    assert second[0]["server"]["cached_tokens"] == 0  # same text, new salt: nothing reused
    assert [r["prompt_ids_sha256"] for r in second] == [r["prompt_ids_sha256"] for r in first[:2]]
    assert second[0]["stream"] is False and second[0]["server"]["attributed"]


def test_full_mode_streams_the_recorded_parameters(engine, mini, tmp_path):
    runner = start_replay(
        mini,
        engine.status().url,
        ReplayOptions(mode="full", draws=("draw-3",), limit=2, max_tokens=12),
        out=tmp_path / "f",
    )
    summary = runner.run_sync()
    records = read_records(runner.draw_file("draw-3"))
    assert summary.state == "finished" and len(records) == 2
    for r in records:
        assert r["status"] == "ok" and r["stream"] and r["server"]["attributed"]
        assert 1 < r["completion_tokens"] <= 12 and r["client"]["chunks"] > 2
        assert r["server"]["decode_s"] > 0 and r["server"]["decode_steps"] >= 1
    d = summary.to_json()["draws"]["draw-3"]
    assert d["verify_step_s"] == pytest.approx(d["decode_s"] / d["decode_steps"])
    for r in records:  # the response's own timings (--enable-per-request-metrics) agree with the deltas
        assert r["server"]["sources"]["decode_s"] == "metrics-delta"
        values, _ = response_values(
            r["response_metrics"], r["completion_tokens"], r["prompt_tokens"], r["client"]["ttft_s"]
        )
        assert values.decode_s == pytest.approx(r["server"]["decode_s"], abs=1e-6)
        assert values.drafted_steps == r["server"]["drafted_steps"]
    # the experiment cell reads the same records and reports the same time per verify step
    cell = start_measures(tallies_of({"draw-3": records})).to_json()
    assert cell["time_per_verify_step"] == d["verify_step_s"]


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # closed again when the block ends


def test_engine_gone_mid_draw_keeps_records_and_the_run_resumes(engine, mini, tmp_path):
    url = engine.status().url
    runner = start_replay(mini, url, ReplayOptions(draws=("draw-2",), limit=4), out=tmp_path / "cut")

    def cut_after_two(p):  # the engine stops answering after two requests (as if it crashed)
        if p.phase == "result" and p.done == 2:
            runner.base_url = _dead_url()

    runner.progress = cut_after_two
    summary = runner.run_sync()
    records = read_records(runner.draw_file("draw-2"))
    assert summary.state == "interrupted" and "--resume" in summary.error
    assert [r["status"] for r in records] == ["ok", "ok", "failed"]
    assert records[2]["error"].startswith("engine unreachable")
    assert summary.draws["draw-2"].failed == 1 and not summary.draws["draw-2"].complete

    resumed = resume_replay(runner.run_dir, base_url=url)
    summary = resumed.run_sync()
    records = read_records(resumed.draw_file("draw-2"))
    assert summary.state == "finished" and summary.attempts == 2
    assert [(r["index"], r["attempt"], r["status"]) for r in records] == [
        (0, 1, "ok"),
        (1, 1, "ok"),
        (2, 1, "failed"),
        (2, 2, "ok"),
        (3, 2, "ok"),
    ]
    assert records[3]["salt"] != records[0]["salt"]
    d = summary.to_json()["draws"]["draw-2"]
    assert (d["requests"], d["ok"], d["failed"], d["complete"]) == (4, 4, 0, True)


def test_cli_replay_json_summary_and_a_bad_workload_sends_nothing(engine, mini, tmp_path, capsys):
    url = engine.status().url
    code = main(
        [
            "replay",
            str(mini),
            "--draws",
            "draw-1",
            "--limit",
            "1",
            "--url",
            url,
            "--out",
            str(tmp_path / "cli"),
            "--json",
            "--quiet",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    d = summary["draws"]["draw-1"]
    for key in ("requests", "failed", "front_end_s", "prefill_s", "queue_s", "ttft_s", "verify_step_s"):
        assert key in d
    assert d["requests"] == 1 and d["failed"] == 0 and d["front_end_s"] > 0

    bad = tmp_path / "bad"
    shutil.copytree(mini, bad)
    with open(bad / "draw-3.jsonl", "a") as fh:
        fh.write('{"id": "torn"\n')
    with httpx.Client() as client:
        before = fetch_metrics(client, url).hist(E2E)[1]
        code = main(["replay", str(bad), "--url", url, "--out", str(tmp_path / "badrun")])
        after = fetch_metrics(client, url).hist(E2E)[1]
    err = capsys.readouterr().err
    assert code == 1 and "nothing was replayed" in err and f"{bad / 'draw-3.jsonl'}:46: bad JSON" in err
    assert after == before and not (tmp_path / "badrun").exists()  # not one request reached the engine


def test_w01_big_region_share_with_the_engines_own_tokenizer(engine, mini):
    """The shape holds with the real template and tokenizer: the system region is ~97-99% of each prompt."""
    from frank.workloads.w01 import TOOLS_HEADER

    url = engine.status().url
    reqs = load_workload(mini, ["draw-1"]).requests["draw-1"]
    ends = {}
    for r in reqs:
        ends.setdefault(r.episode, [r, r])[1] = r
    with httpx.Client(timeout=120) as client:
        model = client.get(url + "/v1/models").json()["data"][0]["id"]
        for first, last in ends.values():
            for r in (first, last):
                whole = client.post(
                    url + "/tokenize",
                    json={
                        "model": model,
                        "messages": r.body["messages"],
                        "tools": r.body["tools"],
                        "add_generation_prompt": True,
                    },
                ).json()["count"]
                region = client.post(
                    url + "/tokenize",
                    json={
                        "model": model,
                        "prompt": r.body["messages"][0]["content"] + TOOLS_HEADER,
                        "add_special_tokens": False,
                    },
                ).json()["count"]
                assert 10_000 <= whole <= 20_000
                assert 0.96 <= region / whole <= 0.995, (r.id, region, whole)
