"""The fidelity rule with the control as reference (`[fidelity] reference = "control"`): design fields, and the
evaluation over hand-made candidate files (each start's own top 64), the token-ID check, too few control
starts, and the results CSV it exports."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from frank.experiments.analysis import analyze
from frank.experiments.design import DesignError, parse_design_text
from frank.experiments.fidelity import save_candidates
from frank.experiments.observations import Observation
from frank.experiments.report_text import format_report
from frank.experiments.results_csv import _fidelity_rows, read_results_csv
from frank.fidelity.control import tokens_sha256
from tests.unit.experiment_helpers import BLOCKS_DESIGN

CONTROL = '\n[fidelity]\nsets = ["short"]\nreference = "control"\n'
TOKENS = tokens_sha256([[1, 5, 9, 2], [1, 7, 3]])  # what every start scored, unless a test says otherwise


def design(extra: str = CONTROL, base: str = BLOCKS_DESIGN):
    return parse_design_text(base + extra, "d.toml")


def _positions(shift: float = 0.0, n: int = 5) -> list[dict[int, float]]:
    """n positions of 65 tokens; `shift` tilts the distribution (0: the same numbers every time)."""
    out = []
    for t in range(n):
        weights = [math.exp(-0.05 * ((i + t) % 65) + shift * (i % 7)) for i in range(65)]
        total = sum(weights)
        out.append({i: math.log(w / total) for i, w in enumerate(weights)})
    return out


def _start(tmp: Path, start: int, arm: str, value: float, shift: float = 0.0, tokens: str | None = TOKENS):
    path = tmp / f"start-{start}.npz"
    save_candidates(path, {"short": _positions(shift)})
    entry = {"name": "short", "kl": None, "positions": 5, "documents": 2, "set_sha256": "s" * 64}
    if tokens is not None:
        entry["tokens_sha256"] = tokens
    block = (start + 1) // 2
    fidelity = {"sets": {"short": entry}, "candidate": str(path)}
    return Observation(start, block, arm, value, "time_per_verify_step", 0, {"a": "x"}, fidelity=fidelity)


def _blocks(tmp: Path, shift: float = 0.0, odd: dict[int, str] | None = None) -> list[Observation]:
    """3 blocks, control (spec-4) first in each: starts 1, 3, 5 the control, 2, 4, 6 the treatment (lower in
    every block); the treatment's distributions tilted by `shift`; `odd` gives a start other token IDs."""
    odd = odd or {}
    return [
        _start(
            tmp, n, "spec-4" if n % 2 else "spec-2", 2.0 if n % 2 else 1.0, 0.0 if n % 2 else shift, odd.get(n, TOKENS)
        )
        for n in range(1, 7)
    ]


def test_identical_candidates_give_zero_kl_and_pass_against_the_first_control_start(tmp_path):
    r = analyze(design(), _blocks(tmp_path))
    fid = r.fidelity
    assert fid["status"] == "pass" and r.verdict == "confirmed", (fid, r.decision.reason)
    assert fid["reference"] == "control" and fid["reference_start"] == 1
    [row] = fid["sets"]
    assert row["treatment"] == 0.0 and row["control"] == 0.0 and row["floor"] == 0.0 and row["reference_start"] == 1
    assert row["starts"] == {"spec-2": 3, "spec-4": 2}  # the reference start is not one of the control's KLs
    assert row["floor_parts"] == {"engine": 0.0, "engine_source": "control starts 1 and 3"}
    assert sorted(e["start"] for e in fid["per_start"]) == [2, 3, 4, 5, 6]
    assert "reference: control start 1" in format_report(r)


def test_a_treatment_that_shifts_the_distribution_fails_the_rule(tmp_path):
    r = analyze(design(), _blocks(tmp_path, shift=0.02))
    fid = r.fidelity
    [row] = fid["sets"]
    assert row["treatment"] > 1e-4 and row["control"] == 0.0 and row["met"] is False
    assert fid["status"] == "fail" and fid["detail"] == "KL above control + floor for: short"
    assert r.verdict == "not confirmed" and "guard failed: fidelity" in r.decision.reason
    assert not fid["mismatched"]


def test_a_fixed_floor_lets_a_small_shift_pass(tmp_path):
    shifted = analyze(design(CONTROL + "floor = 0.01\n"), _blocks(tmp_path, shift=0.02))
    assert shifted.fidelity["status"] == "pass" and shifted.fidelity["sets"][0]["floor"] == 0.01


@pytest.mark.parametrize("odd_start", [2, 3])  # a treatment start, and a control start (not the reference)
def test_a_start_that_scored_other_token_ids_fails_named(tmp_path, odd_start):
    # its top 64 are the reference's own numbers: it would pass on KL alone
    r = analyze(design(), _blocks(tmp_path, odd={odd_start: tokens_sha256([[1, 5, 9, 2], [1, 7, 4]])}))
    fid = r.fidelity
    arm = "spec-4" if odd_start % 2 else "spec-2"
    assert fid["status"] == "fail" and r.verdict == "not confirmed"
    assert fid["mismatched"] == [
        {
            "set": "short",
            "start": odd_start,
            "detail": f"start {odd_start} ({arm}) scored other token IDs than start 1 on short",
        }
    ]
    assert f"start {odd_start} ({arm}) scored other token IDs than start 1 on short" in fid["detail"]
    assert "tokens differ: start" in format_report(r)
    # and its export carries no KL of that set: the CSV cannot pass where the run failed
    assert _fidelity_rows([], fid, "spec-4") == []


def test_a_start_without_a_token_hash_or_with_other_positions_fails(tmp_path):
    r = analyze(design(), _blocks(tmp_path, odd={4: None}))
    assert r.fidelity["status"] == "fail" and r.fidelity["mismatched"][0]["start"] == 4
    starts = _blocks(tmp_path)
    save_candidates(Path(starts[5].fidelity["candidate"]), {"short": _positions(n=4)})  # a position fewer
    r = analyze(design(), starts)
    assert r.fidelity["status"] == "fail" and "start 6 (spec-2) on short" in r.fidelity["detail"]


def test_one_control_start_with_a_candidate_leaves_the_rule_unchecked(tmp_path):
    starts = _blocks(tmp_path)
    for o in starts[2:]:  # starts 3..6 lost their files: only start 1 of the control has one
        if o.arm == "spec-4":
            Path(o.fidelity["candidate"]).unlink()
    r = analyze(design(), starts)
    fid = r.fidelity
    assert fid["status"] == "unchecked" and r.verdict == "incomplete"
    assert any("1 control start(s) with a candidate file; the control as reference needs 2" in n for n in fid["notes"])
    assert any("start 3 (spec-4) has no candidate file" in n for n in fid["notes"])


def test_the_exported_rows_decide_the_csv_as_the_run_did(tmp_path):
    d = design()
    for shift, status in ((0.0, "pass"), (0.02, "fail")):
        run = analyze(d, _blocks(tmp_path, shift=shift))
        rows = ["start_order,block,arm,value,measure"]
        rows += [f"{n},{(n + 1) // 2},{'spec-4' if n % 2 else 'spec-2'},{2.0 if n % 2 else 1.0}," for n in range(1, 7)]
        rows += [",".join((s, "", a, repr(float(v)), m)) for s, a, v, m in _fidelity_rows([], run.fidelity, "spec-4")]
        csv = tmp_path / "r.csv"
        csv.write_text("\n".join(rows) + "\n")
        again = analyze(d, read_results_csv(csv, d), source="external")
        assert again.fidelity["status"] == run.fidelity["status"] == status
        assert again.fidelity["sets"][0]["treatment"] == pytest.approx(run.fidelity["sets"][0]["treatment"])
        assert again.fidelity["reference_start"] is None  # from rows: named as such
        assert any("from results rows" in n for n in again.fidelity["notes"])


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            '\n[fidelity]\nreference = "checkpoint"\n',
            "d.toml: fidelity.reference: 'checkpoint' is not one of: model, control",
        ),
        ("\n[fidelity]\nreference = 1\n", "d.toml: fidelity.reference: expected a string, got 1"),
    ],
)
def test_bad_reference_is_named_with_its_line(extra, message):
    with pytest.raises(DesignError) as err:
        design(extra)
    assert re.match(r"d\.toml:\d+: ", str(err.value)), str(err.value)
    assert re.sub(r"^d\.toml:\d+: ", "d.toml: ", str(err.value)) == message


def test_a_measured_floor_needs_two_control_starts():
    one_block = BLOCKS_DESIGN.replace("blocks = 3", "blocks = 1")
    with pytest.raises(DesignError) as err:
        design(CONTROL, one_block)
    text = str(err.value)
    assert re.match(r"d\.toml:\d+: fidelity\.reference: \"control\" with floor = \"measured\"", text), text
    assert "control arm 'spec-4', which gets 1 in this design" in text
    assert design(CONTROL + "floor = 0.001\n", one_block).fidelity.reference == "control"  # a fixed floor: fine
    assert design(CONTROL).fidelity.floor == "measured"


def test_canonical_form_is_unchanged_without_the_key():
    plain, model = (
        design('\n[fidelity]\nsets = ["short"]\n'),
        design('\n[fidelity]\nsets = ["short"]\nreference = "model"\n'),
    )
    assert json.loads(plain.canonical)["fidelity"] == {"sets": ["short"], "floor": "measured"}
    assert model.sha256 == plain.sha256 and model.fidelity.reference == "model"
    control = design()
    assert json.loads(control.canonical)["fidelity"]["reference"] == "control" and control.sha256 != plain.sha256
