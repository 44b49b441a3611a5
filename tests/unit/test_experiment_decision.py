"""The typed Decision: made by frank.experiments.decision.decide, held by the report analyze returns."""

from __future__ import annotations

import pytest

from frank.experiments.analysis import analyze
from frank.experiments.decision import Guard, decide
from frank.experiments.design import load_design
from frank.experiments.results_csv import read_results_csv
from frank.paths import REPO_ROOT

DESIGNS = REPO_ROOT / "frank" / "experiments" / "designs"


def test_a_confirmation_a_guard_failed_on_is_not_one() -> None:
    d = decide("confirmed", "5 of 5 blocks lower", [Guard("no_failed_requests", "fail", "1 failed")], None)
    assert d.verdict == "not confirmed" and not d.confirmed
    assert d.reason.startswith("guard failed: no_failed_requests") and d.failed_guards == ("no_failed_requests",)


def test_an_unchecked_fidelity_rule_makes_a_confirmation_incomplete() -> None:
    d = decide("confirmed", "p = 1/32", [], {"status": "unchecked", "detail": "no KL measured"})
    assert d.verdict == "incomplete" and "no KL measured" in d.reason
    kept = decide("not confirmed", "p = 1/2", [], {"status": "unchecked", "detail": "no KL"})
    assert kept.verdict == "not confirmed" and "could not be evaluated" in kept.reason
    held = decide("confirmed", "p = 1/32", [], {"status": "pass"})
    assert held.verdict == "confirmed" and held.reason.endswith("and the fidelity rule holds")


def test_the_report_holds_the_decision_it_made() -> None:
    design = load_design(DESIGNS / "seed-schedule-2.toml")
    report = analyze(design, read_results_csv(DESIGNS / "seed-schedule-2.csv", design), source="external")
    d = report.decision
    assert (d.verdict, d.p_fraction, d.design_sha256) == ("confirmed", "1/32", design.sha256)
    assert d.p_value == pytest.approx(1 / 32) and round(d.mean_effect_pct or 0, 2) == -2.07
