from __future__ import annotations

import json
from pathlib import Path

import pytest

from frank.console.cli import main
from frank.experiments.analysis import analyze
from frank.experiments.design import load_design, parse_design_text
from frank.experiments.errors import ResultsError
from frank.experiments.observations import Observation
from frank.experiments.results_csv import read_results_csv
from frank.paths import REPO_ROOT

DESIGNS = REPO_ROOT / "frank" / "experiments" / "designs"


def _analyze(name: str, csv_path: Path | None = None) -> dict:
    design = load_design(DESIGNS / f"{name}.toml")
    return analyze(design, read_results_csv(csv_path or DESIGNS / f"{name}.csv", design), source="external")


def test_seed_schedule_table_is_confirmed_at_one_in_32() -> None:
    r = _analyze("seed-schedule-2")
    assert r.verdict == "confirmed"
    assert r.p_value == pytest.approx(1 / 32, rel=1e-12) and r.p_fraction == "1/32"
    assert r.null_size == 32 and r.blocks.wins == 5
    assert [round(b.effect_pct, 2) for b in r.blocks.blocks] == [-2.44, -1.77, -2.92, -1.70, -1.50]
    assert round(r.mean_effect_pct, 2) == -2.07


def test_seed_cache_table_is_confirmed_at_one_in_70() -> None:
    r = _analyze("seed-region-cache")
    assert r.verdict == "confirmed"
    assert r.p_value == pytest.approx(1 / 70, rel=1e-12) and r.p_fraction == "1/70"
    assert r.null_size == 70 and r.comparison.separated
    assert round(-r.comparison.mean_difference, 2) == 5.57  # "5.57 s per draw"
    assert [o["arm"] for o in r.order] == [
        "cache-on",
        "cache-off",
        "cache-off",
        "cache-on",
        "cache-off",
        "cache-off",
        "cache-on",
        "cache-on",
    ]


def test_seed_adoption_rule(tmp_path: Path) -> None:
    r = _analyze("seed-adoption")
    assert r.verdict == "confirmed" and r.p_value is None
    met = {c.measure: (c.met, c.treatment, c.control) for c in r.criteria or ()}
    assert met["w01_draw_s"][0] and met["w01_draw_s"][1] == pytest.approx(1067.19)
    assert met["w01_draw_s"][2] == pytest.approx(1486.61)
    assert met["episodes_passed"] == (True, 13, 15)
    # three fewer passes would break rule 2
    worse = tmp_path / "adoption.csv"
    worse.write_text(
        (DESIGNS / "seed-adoption.csv")
        .read_text()
        .replace("vllm-exl3,episodes_passed,13", "vllm-exl3,episodes_passed,12")
    )
    r2 = _analyze("seed-adoption", worse)
    assert r2.verdict == "not confirmed" and "episodes_passed" in r2.decision.reason


def test_one_block_the_other_way_is_not_confirmed(tmp_path: Path) -> None:
    csv = tmp_path / "s.csv"
    csv.write_text((DESIGNS / "seed-schedule-2.csv").read_text().replace(",3,sched-2,97.08", ",3,sched-2,100.5"))
    r = _analyze("seed-schedule-2", csv)
    assert r.verdict == "not confirmed" and r.blocks.wins == 4 and r.blocks.losses == 1
    assert r.p_value == pytest.approx(6 / 32)
    assert "lower in 4 of 5 blocks, the rule needs all 5" in r.decision.reason
    assert r.decision.revert.outcome in ("unchecked", "keep")


def test_missing_block_is_incomplete(tmp_path: Path) -> None:
    csv = tmp_path / "s.csv"
    csv.write_text(
        "\n".join(
            line for line in (DESIGNS / "seed-schedule-2.csv").read_text().splitlines() if not line.startswith(",5,")
        )
    )
    r = _analyze("seed-schedule-2", csv)
    assert r.verdict == "incomplete" and "1 of 5 blocks" in r.decision.reason


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("start_order,block,arm,value\n,1,sched-3,1\n", r"s\.csv:2: arm: 'sched-3' is not an arm"),
        ("start_order,block,arm,value\n,1,sched-1,fast\n", r"s\.csv:2: value: 'fast' is not a number"),
        ("start_order,block,arm,value\n,9,sched-1,1\n", r"s\.csv:2: block: '9' is not a block of 1\.\.5"),
        ("start_order,arm,value\n1,sched-1,1\n", r"s\.csv:1: missing column 'block'"),
        ("start_order,block,arm,speed\n", r"s\.csv:1: unknown column 'speed'"),
        ("# c\nstart_order,block,arm,value\n,1,sched-1,1\n,1,sched-1,2\n", r"s\.csv:4: block 1 has a second row"),
        ("start_order,block,arm,value\n,1,sched-1\n", r"s\.csv:2: expected 4 fields, got 3"),
    ],
)
def test_results_csv_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    csv = tmp_path / "s.csv"
    csv.write_text(text)
    with pytest.raises(ResultsError, match=message):
        read_results_csv(csv, load_design(DESIGNS / "seed-schedule-2.toml"))


def test_revert_rule_fires_on_a_worse_effect() -> None:
    design = load_design(DESIGNS / "spec-tokens-2-vs-4.toml")
    obs = []
    for block in (1, 2, 3):
        obs += [
            Observation(
                start=2 * block - 1, block=block, arm="spec-4", value=1.0, failed_requests=0, prompt_hashes={"r": "h"}
            ),
            Observation(
                start=2 * block, block=block, arm="spec-2", value=1.05, failed_requests=0, prompt_hashes={"r": "h"}
            ),
        ]
    r = analyze(design, obs, failed_attempts={})
    assert r.verdict == "not confirmed" and r.blocks.losses == 3
    assert r.decision.revert.outcome == "revert" and "worse than the 1% limit" in r.decision.revert.triggers[0]
    obs_fail = [
        Observation(
            o.start,
            o.block,
            o.arm,
            0.9 if o.arm == "spec-2" else 1.0,
            failed_requests=1 if o.arm == "spec-2" and o.block == 1 else 0,
            prompt_hashes={"r": "h"},
        )
        for o in obs
    ]
    r2 = analyze(design, obs_fail, failed_attempts={})
    assert r2.verdict == "not confirmed" and "guard failed: no_failed_requests" in r2.decision.reason
    assert r2.decision.revert.outcome == "revert" and "only in spec-2" in r2.decision.revert.triggers[0]


def test_cli_analyze_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "experiment",
                "analyze",
                str(DESIGNS / "seed-region-cache.toml"),
                str(DESIGNS / "seed-region-cache.csv"),
                "--json",
            ]
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    for key in ("design_sha256", "order", "starts", "p_value", "null_size", "decision"):
        assert key in payload
    assert payload["decision"] == "confirmed" and payload["null_size"] == 70
    assert payload["design_sha256"] == load_design(DESIGNS / "seed-region-cache.toml").sha256
    assert (
        main(["experiment", "analyze", str(DESIGNS / "seed-schedule-2.toml"), str(DESIGNS / "seed-schedule-2.csv")])
        == 0
    )
    out = capsys.readouterr().out
    assert "p = 1/32" in out and "decision: CONFIRMED" in out


def test_cli_register_prints_id_hash_order_and_smallest_p(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FRANK_HOME", str(tmp_path))
    design = DESIGNS / "seed-schedule-2.toml"
    assert main(["experiment", "register", str(design), "--seed", "5"]) == 0
    out = capsys.readouterr().out
    sha = load_design(design).sha256
    assert out.startswith("registered ") and sha in out and "smallest p     1/32" in out
    assert "seed           5 " in out and "(b5)" in out
    assert main(["experiment", "register", str(DESIGNS / "seed-schedule-2.toml"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["design_sha256"] == sha and len(payload["order"]) == 10 and payload["order_count"] == 32
    assert main(["experiment", "list", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert len(runs) == 2 and {r["status"] for r in runs} == {"registered"}
    # a rule that can never be met is refused, naming the field
    bad = tmp_path / "bad.toml"
    bad.write_text(
        design.read_text()
        .replace("blocks = 5", "blocks = 4")
        .replace("require_all = true ", "alpha = 0.05\nrequire_all = true ")
    )
    assert main(["experiment", "register", str(bad)]) != 0
    assert "rule.alpha: 0.05 can never be met: 4 blocks give at best p = 1/16" in capsys.readouterr().err


def test_external_design_registers_but_does_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FRANK_HOME", str(tmp_path))
    assert main(["experiment", "register", str(DESIGNS / "seed-adoption.toml"), "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["experiment", "run", run_id]) != 0
    assert "measures come from elsewhere" in capsys.readouterr().err
    assert parse_design_text((DESIGNS / "seed-adoption.toml").read_text()).kind == "external"
