"""The revert watch's replay adapter on the shared engine: a replay records the engine's profile and knobs,
and one with a served part's live knob (region_cache on) is checked against the latest earlier replay of the
same workload without it (cache off). Nothing fails here, so every rule must say ok, with the numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frank.workloads.format import write_workload

pytestmark = pytest.mark.engine

CAMPAIGN = """version = 1
name = "replay-watch"

[[parts]]
name = "cache-live"
profile = "embedded-cpu"
knobs = { region_cache = "on" }
state = "served"

[[parts.evidence]]
state = "served"
policy = "served to watch it"

[[parts.revert_rules]]
name = "only-cache-fails"
kind = "treatment_only_failures"

[[parts.revert_rules]]
name = "lower-pass-rate"
kind = "pass_rate_drop"
"""


def test_a_replay_with_a_served_part_is_checked_against_the_one_without(frank_cli, engine, tmp_path: Path) -> None:
    records = [
        {
            "id": "r1",
            "task": "t",
            "episode": "e",
            "turn": 1,
            "offset_s": 0.0,
            "body": {
                "model": "tiny-frank",
                "max_tokens": 4,
                "temperature": 0,
                "messages": [{"role": "user", "content": "Say hello to the region cache."}],
            },
        }
    ]
    workload = write_workload(tmp_path / "wl", "watch-one", "one request", [("1", records)])
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(CAMPAIGN)
    assert frank_cli("campaign", "init", "--file", str(campaign)).returncode == 0

    runs = {}
    try:
        for value in ("off", "on"):
            engine.set_knob("region_cache", value)
            res = frank_cli("replay", str(workload), "--json", "--quiet")
            assert res.returncode == 0, res.stderr[-2000:]
            runs[value] = json.loads(res.stdout)["run_id"]
    finally:
        engine.set_knob("region_cache", "off")
    meta = json.loads((Path(json.loads(res.stdout)["run_dir"]) / "run.json").read_text())
    assert meta["engine"]["profile"] == "embedded-cpu" and meta["engine"]["knobs"]["region_cache"] == "on"

    watch = frank_cli("campaign", "watch", "--file", str(campaign), "--json")
    assert watch.returncode == 0, watch.stderr
    checks = [c for c in json.loads(watch.stdout)["new_checks"] if c["run_id"] == runs["on"]]
    assert len(checks) == 1, "the replay with the cache on is checked once"
    check = checks[0]
    assert check["run_kind"] == "replay" and check["control"]["run_id"] == runs["off"]
    outcomes = {r["name"]: (r["outcome"], r["detail"]) for r in check["rules"]}
    assert outcomes["only-cache-fails"] == ("ok", "0 failure(s) with the part, 0 without")
    assert outcomes["lower-pass-rate"][0] == "ok" and "1/1 = 1.000 with the part" in outcomes["lower-pass-rate"][1]
    assert check["fired"] == []
    again = json.loads(frank_cli("campaign", "watch", "--file", str(campaign), "--json").stdout)
    assert all(c["run_id"] != runs["on"] for c in again["new_checks"]), "never checked twice"
