"""The experiments' fidelity rule: design fields (errors name the field), evaluation from measured data
(cells' results, candidate files, results CSV rows), the guard and the revert rule."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from frank.experiments.analysis import analyze
from frank.experiments.design import DesignError, parse_design_text
from frank.experiments.fidelity import engine_floor_between, save_candidates
from frank.experiments.observations import Observation
from frank.experiments.report_text import format_report
from frank.experiments.results_csv import read_results_csv
from frank.fidelity.candidate import top_k_arrays
from frank.fidelity.measure import mean_kl
from tests.unit.experiment_helpers import BALANCED_DESIGN

FIDELITY = '\n[fidelity]\nsets = ["code", "prose"]\nfloor = 1e-12\n'


def design(extra: str = FIDELITY, base: str = BALANCED_DESIGN):
    return parse_design_text(base + extra, "d.toml")


@pytest.mark.parametrize(
    "extra, message",
    [
        ("\n[fidelity]\nsets = []\n", "d.toml: fidelity.sets: must name at least one text set"),
        ('\n[fidelity]\nsets = ["code", 3]\n', "d.toml: fidelity.sets[1]: expected a set name or folder, got 3"),
        ('\n[fidelity]\nfloor = "auto"\n', "d.toml: fidelity.floor: 'auto': expected \"measured\" or a number"),
        ("\n[fidelity]\nfloor = -1\n", "d.toml: fidelity.floor: must be 0 or more, got -1"),
        ("\n[fidelity]\ntolerance = 1\n", "d.toml: fidelity.tolerance: unknown field"),
        ("\n[revert]\nfidelity_regression = true\n", "d.toml: revert.fidelity_regression: needs a [fidelity] table"),
    ],
)
def test_bad_fidelity_fields_are_named(extra, message):
    with pytest.raises(DesignError) as err:
        design(extra)
    assert re.match(r"d\.toml:\d+: ", str(err.value)), str(err.value)  # the line of the field
    assert re.sub(r"^d\.toml:\d+: ", "d.toml: ", str(err.value)).startswith(message)


def test_fidelity_defaults_and_hash():
    d = design("\n[fidelity]\n")
    assert d.fidelity.sets == ("code", "agent", "prose") and d.fidelity.floor == "measured"
    plain = design("")
    assert "fidelity" not in json.loads(plain.canonical)  # designs without it keep their old hash
    assert json.loads(d.canonical)["fidelity"] == {"sets": ["code", "agent", "prose"], "floor": "measured"}
    assert d.sha256 != plain.sha256


def _obs(start: int, arm: str, value: float, kls: dict[str, float], candidate: str | None = None) -> Observation:
    return Observation(
        start=start,
        block=None,
        arm=arm,
        value=value,
        measure="front_end_per_draw",
        failed_requests=0,
        prompt_hashes={"a": "x"},
        fidelity={"sets": {n: {"kl": v, "reference_floor": 1e-16} for n, v in kls.items()}, "candidate": candidate},
    )


def _starts(t_kl: float, c_kl: float) -> list[Observation]:
    # the treatment is faster in every start (confirmed at 1/20), its KL as given
    return [
        _obs(i + 1, arm, v, {"code": kl, "prose": kl})
        for i, (arm, v, kl) in enumerate(
            [
                ("on", 1.0, t_kl),
                ("off", 2.0, c_kl),
                ("on", 1.1, t_kl),
                ("off", 2.1, c_kl),
                ("on", 1.2, t_kl),
                ("off", 2.2, c_kl),
            ]
        )
    ]


def test_rule_met_within_the_floor_and_failed_above_it():
    d = design()
    ok = analyze(d, _starts(t_kl=5e-13, c_kl=1e-13))
    assert ok.verdict == "confirmed"
    assert ok.fidelity["status"] == "pass"
    row = ok.fidelity["sets"][0]
    assert row["name"] == "code" and row["difference"] == pytest.approx(4e-13) and row["floor"] == 1e-12
    bad = analyze(d, _starts(t_kl=7e-9, c_kl=1e-13))
    assert bad.fidelity["status"] == "fail"
    assert bad.verdict == "not confirmed"
    assert "guard failed: fidelity" in bad.decision.reason
    text = format_report(bad)
    assert "fidelity (KL, top-64; rule: on <= off + floor" in text and "NOT met" in text


def test_no_fidelity_data_leaves_the_guard_unchecked():
    starts = [Observation(o.start, None, o.arm, o.value, o.measure, 0, {"a": "x"}) for o in _starts(0, 0)]
    r = analyze(design(), starts)
    assert r.fidelity["status"] == "unchecked"
    assert any("guards not checked here: fidelity" in n for n in r.notes)


SPEC = "/data/sets/my set"  # a design may name a set by its folder: results are keyed by that


def test_measured_floor_comes_from_two_control_starts(tmp_path: Path):
    ln = math.log
    # two control starts whose engines differ a little; k = 64 needs 64 tokens per position
    first = [{i: ln(0.01) for i in range(64)} | {64: ln(0.001)}]
    second = [{i: ln(0.01 * (1.001 if i % 2 else 0.999)) for i in range(64)}]
    paths = []
    for n, cand in enumerate((first, second)):
        path = tmp_path / f"c{n}.npz"
        save_candidates(path, {"prose": cand, SPEC: cand})
        paths.append(str(path))
    ids, lps = top_k_arrays(first, 64)
    expected = mean_kl(ids, lps, second).kl
    assert engine_floor_between(paths[0], paths[1], SPEC) == pytest.approx(expected, rel=1e-12) and expected > 0
    d = design(f'\n[fidelity]\nsets = ["{SPEC}"]\n')
    starts = [
        _obs(1, "off", 2.0, {SPEC: 1e-13}, paths[0]),
        _obs(2, "on", 1.0, {SPEC: 1e-13 + expected / 2}),
        _obs(3, "off", 2.1, {SPEC: 1e-13}, paths[1]),
        _obs(4, "on", 1.1, {SPEC: 1e-13}),
        _obs(5, "off", 2.2, {SPEC: 1e-13}),
        _obs(6, "on", 1.2, {SPEC: 1e-13}),
    ]
    r = analyze(d, starts)
    row = r.fidelity["sets"][0]
    assert row["floor_parts"]["engine"] == pytest.approx(expected) and row["floor"] == pytest.approx(expected)
    assert row["floor_parts"]["engine_source"] == "control starts 1 and 3"
    assert r.fidelity["status"] == "pass"


SEED_ADOPTION = Path(__file__).resolve().parents[2] / "frank" / "experiments" / "designs" / "seed-adoption.toml"


def test_results_csv_rows_and_revert(tmp_path: Path):
    text = (
        SEED_ADOPTION.read_text()
        + '\n[fidelity]\nsets = ["s1", "s2", "s3"]\nfloor = "measured"\n'
        + "\n[revert]\nfidelity_regression = true\n"
    )
    d = parse_design_text(text, "adoption.toml")
    rows = [
        "start_order,block,arm,measure,value",
        "1,,vllm-exl3,w01_draw_s,300",
        "2,,llamacpp-iq2,w01_draw_s,400",
        ",,vllm-exl3,episodes_passed,13",
        ",,llamacpp-iq2,episodes_passed,15",
        ",,vllm-exl3,kl,0.11",
        ",,llamacpp-iq2,kl,0.23",
    ]
    # the seed's numbers: 0.129/0.095/0.105 against 0.270/0.229/0.199, reference floor up to 0.031
    for name, t, c in (("s1", 0.129, 0.270), ("s2", 0.095, 0.229), ("s3", 0.105, 0.199)):
        rows += [
            f",,vllm-exl3,fidelity:{name},{t}",
            f",,llamacpp-iq2,fidelity:{name},{c}",
            f",,llamacpp-iq2,fidelity_floor:{name},0.031",
        ]
    csv = tmp_path / "r.csv"
    csv.write_text("\n".join(rows) + "\n")
    r = analyze(d, read_results_csv(csv, d), source="external")
    assert r.fidelity["status"] == "pass" and r.verdict == "confirmed"
    assert [s["floor"] for s in r.fidelity["sets"]] == [0.031] * 3
    assert r.decision.revert.outcome == "keep"
    # swap the arms' KL: the treatment is now worse than the control by more than the floor on every set
    swapped = (
        csv.read_text()
        .replace("vllm-exl3,fidelity", "X")
        .replace("llamacpp-iq2,fidelity:", "vllm-exl3,fidelity:")
        .replace("X", "llamacpp-iq2,fidelity")
        .replace("vllm-exl3,fidelity_floor", "llamacpp-iq2,fidelity_floor")
    )
    csv.write_text(swapped)
    r = analyze(d, read_results_csv(csv, d), source="external")
    assert r.fidelity["status"] == "fail" and r.verdict == "not confirmed"
    assert r.decision.revert.outcome == "revert" and "fidelity regression" in r.decision.revert.triggers[0]
