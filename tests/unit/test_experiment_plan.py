"""Power from measured noise (frank/experiments/plan.py): exact for the sign test, simulated for the
balanced permutation test, and the CLI / console preview that show it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from scipy import stats

from frank.console.cli import main
from frank.experiments import plan
from frank.experiments.analysis import ExperimentReport, analyze
from frank.experiments.design import load_design
from frank.experiments.tally import BlockResult, BlockTally

DESIGNS = Path(__file__).resolve().parents[2] / "frank" / "experiments" / "designs"


def test_seed_schedule_design_power_is_exact():
    design = load_design(DESIGNS / "seed-schedule-2.toml")  # 5 blocks, lower in all 5
    p = plan.plan(design, spread_pct=1.0, effect_pct=2.0)
    q = stats.norm.cdf(2.0)
    assert p.test == "sign" and p.size == 5 and p.level == 1 / 32
    assert p.win_probability == pytest.approx(q) and p.power == pytest.approx(q**5)
    # at 1/32, 9 blocks confirm with 8 wins of 9: more power than "all 5"; 5 is the smallest with 80%
    assert p.blocks_for_80 == 5 and p.blocks_for_95 == 9
    assert plan.sign_power(9, q, 1 / 32) == pytest.approx(q**9 + 9 * q**8 * (1 - q))
    # no effect: the rule confirms with its false-positive rate, 1/32
    assert plan.plan(design, 1.0, 0.0).power == pytest.approx(1 / 32)


def test_more_noise_needs_more_blocks():
    design = load_design(DESIGNS / "seed-schedule-2.toml")
    quiet, noisy = plan.plan(design, 1.0, 2.0), plan.plan(design, 10.0, 2.0)
    assert noisy.power < 0.1 < quiet.power and noisy.blocks_for_80 > 200


def test_balanced_permutation_power_is_simulated_with_the_exact_p():
    design = load_design(DESIGNS / "region-cache-on-off.toml")  # 3 + 3 starts, alpha 0.05
    assert design.kind == "balanced" and design.rule.alpha == 0.05
    # 1/C(6,3) = 1/20 = 0.05: only the most extreme order confirms; with no effect that is 1 in 20
    assert plan.permutation_power(3, 0.0, 5.0, 0.05) == pytest.approx(0.05, abs=0.015)
    assert plan.permutation_power(2, 50.0, 1.0, 0.05) == 0.0  # 1/C(4,2) = 1/6 never reaches 0.05
    big = plan.plan(design, spread_pct=1.0, effect_pct=10.0)
    assert big.power > 0.99 and big.blocks_for_80 == 3 and big.size_unit == "starts per arm"


def _aa_report(effects: list[float | None]) -> ExperimentReport:
    """A blocks report with these block effects (the rest of the report as analyze makes it)."""
    rows = tuple(BlockResult(i + 1, {}, effect, None) for i, effect in enumerate(effects))
    return replace(analyze(load_design(DESIGNS / "seed-schedule-2.toml"), []), blocks=BlockTally(rows, 0, 0, 0, (), 0))


def test_spread_from_an_aa_report():
    spread, n, mean = plan.spread_from_report(_aa_report([1.0, -1.0, None, 3.0]))
    assert (spread, n, mean) == (pytest.approx(2.0), 3, pytest.approx(1.0))
    with pytest.raises(plan.PlanError, match="1 block effect"):
        plan.spread_from_report(_aa_report([1.0]))


def test_cli_plan_json(capsys):
    assert (
        main(
            [
                "experiment",
                "plan",
                str(DESIGNS / "seed-schedule-2.toml"),
                "--spread-pct",
                "1",
                "--effect-pct",
                "2",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["power"] == pytest.approx(stats.norm.cdf(2.0) ** 5)
    assert (out["blocks_for_80"], out["blocks_for_95"]) == (5, 9)


def test_registration_preview_lines(monkeypatch):
    from frank.console import power_preview

    design = load_design(DESIGNS / "seed-schedule-2.toml")
    monkeypatch.setattr(plan, "latest_aa_spread", lambda measure: (1.0, "A/A run X (3 effects)"))
    lines = power_preview.power_lines(design)
    assert lines[0] == "power    at a spread of 1% (A/A run X (3 effects)):"
    assert lines[1] == "  true effect 2%: power 0.89; blocks for 80% 5, for 95% 9"
    monkeypatch.setattr(plan, "latest_aa_spread", lambda measure: None)
    assert "no A/A run on time_per_verify_step yet" in power_preview.power_lines(design)[0]
