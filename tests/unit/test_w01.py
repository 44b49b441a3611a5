"""The synthetic W01: deterministic, the seed's shape at both scales, and the built-in cache."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path

import pytest

from frank.console.cli import main
from frank.workloads.catalog import list_workloads
from frank.workloads.format import check_workload, load_workload
from frank.workloads.w01 import DRAWS, REQUESTS_PER_DRAW, TASKS, ensure_builtin, estimate_tokens, generate, make_w01


def folder_digest(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.iterdir())}


@pytest.fixture(scope="module")
def mini(tmp_path_factory) -> Path:
    return make_w01(tmp_path_factory.mktemp("w01") / "mini", "mini", seed=1)


def test_same_seed_same_bytes_other_seed_other_bytes(mini: Path, tmp_path: Path):
    again = make_w01(tmp_path / "again", "mini", seed=1)
    assert folder_digest(again) == folder_digest(mini)
    other = make_w01(tmp_path / "other", "mini", seed=2)
    assert folder_digest(other)["draw-1.jsonl"] != folder_digest(mini)["draw-1.jsonl"]


def _shape(requests_by_draw) -> None:
    for _draw, reqs in requests_by_draw.items():
        assert len(reqs) == REQUESTS_PER_DRAW
        episodes = defaultdict(list)
        for r in reqs:
            episodes[r["episode"]].append(r)
        # six fresh conversations per draw, one per task, each run to its end before the next starts
        assert sorted(e[0]["task"] for e in episodes.values()) == sorted(t.key for t in TASKS)
        order = [r["episode"] for r in reqs]
        assert order == sorted(order, key=lambda e: order.index(e))
        for reqs_of in episodes.values():
            assert [r["turn"] for r in reqs_of] == list(range(1, len(reqs_of) + 1))
            system = reqs_of[0]["body"]["messages"][0]
            assert system["role"] == "system"
            for prev, cur in zip(reqs_of, reqs_of[1:]):
                pm, cm = prev["body"]["messages"], cur["body"]["messages"]
                assert cm[: len(pm)] == pm and len(cm) == len(pm) + 2  # grows by one tool round trip
                assert cm[0]["content"] == system["content"]  # the big region repeats verbatim
                call, result = cm[-2], cm[-1]
                assert call["role"] == "assistant" and call["tool_calls"][0]["function"]["name"]
                json.loads(call["tool_calls"][0]["function"]["arguments"])
                assert result["role"] == "tool" and result["tool_call_id"] == call["tool_calls"][0]["id"]
        offsets = [r["offset_s"] for r in reqs]
        assert offsets == sorted(offsets) and offsets[0] == 0.0
    # no two draws share a system region: every draw's first requests are new to any cache
    firsts = [r["body"]["messages"][0]["content"] for reqs in requests_by_draw.values() for r in reqs if r["turn"] == 1]
    assert len(firsts) == DRAWS * len(TASKS) == len(set(firsts))


def _sizes(requests_by_draw) -> tuple[float, float, float, float]:
    ratios, totals = [], []
    for reqs in requests_by_draw.values():
        for r in reqs:
            region, total = estimate_tokens(r["body"])
            ratios.append(region / total)
            totals.append(total)
    return min(ratios), max(ratios), min(totals), max(totals)


def test_mini_has_the_seeds_shape(mini: Path):
    workload, errors = check_workload(mini, keep=True)
    assert errors == []
    assert workload.draw_names == ["draw-1", "draw-2", "draw-3"] and workload.total_requests == 135
    by_draw = {
        d: [dict(id=r.id, task=r.task, episode=r.episode, turn=r.turn, offset_s=r.offset_s, body=r.body) for r in reqs]
        for d, reqs in workload.requests.items()
    }
    _shape(by_draw)
    lo, hi, smallest, largest = _sizes(by_draw)
    # a tenth of full; the template's fixed ~20 tokens per tool round trip do not shrink with the scale
    assert 10_500 <= smallest and largest <= 17_500
    assert 0.978 <= lo and hi <= 0.99
    kinds = {t.kind for t in TASKS}
    assert kinds == {"coding", "analysis"}
    body = workload.requests["draw-1"][0].body
    assert body["tools"] and body["stream"] is True and body["temperature"] == 1.0


def test_full_scale_prompts_are_105k_to_175k_tokens_with_a_98_to_99_percent_region():
    by_draw = {name: list(records) for name, records in generate("full", seed=1)}
    _shape(by_draw)
    lo, hi, smallest, largest = _sizes(by_draw)
    assert 105_000 <= smallest and largest <= 175_000
    assert 0.98 <= lo and hi <= 0.99


def test_builtin_is_generated_once_and_regenerated_when_damaged(fresh_frank_home: Path):
    entries = {e.name: e for e in list_workloads()}
    assert not entries["w01-mini"].generated and entries["w01-full"].source == "builtin"
    path = ensure_builtin("w01-mini")
    stamp = (path / "draw-1.jsonl").stat().st_mtime_ns
    assert ensure_builtin("w01-mini") == path and (path / "draw-1.jsonl").stat().st_mtime_ns == stamp
    (path / "workload.toml").write_text("format = 'frank-workload'\n")  # damaged: regenerated
    ensure_builtin("w01-mini")
    assert load_workload(path, ["draw-1"]).total_requests == 135


def test_cli_make_and_list(tmp_path: Path, fresh_frank_home: Path, capsys):
    out = tmp_path / "made"
    assert main(["workload", "make", "w01", "--scale", "mini", "--seed", "3", "--out", str(out), "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["draws"]["draw-2"]["requests"] == 45
    assert main(["workload", "make", "w01", "--out", str(out)]) == 1  # refuses to overwrite
    assert "exists" in capsys.readouterr().err
    user = fresh_frank_home / "data" / "workloads" / "mine"
    make_w01(user, "mini", seed=4)
    assert main(["workload", "list", "--json"]) == 0
    listed = {w["name"]: w for w in json.loads(capsys.readouterr().out)["workloads"]}
    assert listed["mine"]["source"] == "user" and listed["mine"]["requests"] == 135
    assert listed["w01-mini"]["source"] == "builtin"
