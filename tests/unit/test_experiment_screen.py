"""Screens (frank.experiments.screen, screen_report): the file's edge, the pick under its frozen rule, the
run through the experiment runner, the self-contained record decided again, the confirmation design, and a
screen refused as evidence."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from frank.campaign.evidence import run_report
from frank.errors import FrankError
from frank.experiments import registry
from frank.experiments.design import parse_design_text
from frank.experiments.journal import CellResult
from frank.experiments.randomize import Slot
from frank.experiments.registry import register_screen
from frank.experiments.runner import run_experiment
from frank.experiments.screen import analyze_screen, parse_screen_text
from frank.experiments.screen_report import ScreenRecordError, read_record, record_for_run, write_json
from frank.experiments.tables import DesignError
from tests.unit.test_experiment_runner import FakeCellExecutor

SCREEN = """
name = "pool"
question = "Which pool setting shortens verify steps?"
profile = "llamacpp-cpu-moe"
repeats = 3

[control]
name = "default"
knobs = { cpu_threads = 2, cpu_poll = 0 }

[[candidates]]
name = "one-thread"
knobs = { cpu_threads = 1 }

[grid]
cpu_poll = [50, 100]

[workload]
name = "w01-mini"
draws = ["draw-1"]
mode = "full"
requests = 3
max_tokens = 8
warmup_requests = 1

[measure]
name = "time_per_verify_step"

[pick]
min_wins = 2

[confirm]
effect_pct = 5
min_blocks = 5
max_blocks = 9
"""


@pytest.fixture(autouse=True)
def frank_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FRANK_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_candidates_from_a_list_and_a_grid_sit_on_the_controls_knobs() -> None:
    s = parse_screen_text(SCREEN)
    assert [a.name for a in s.settings] == ["default", "one-thread", "cpu_poll.50", "cpu_poll.100"]
    assert s.candidates[0].knob_dict == {"cpu_threads": 1, "cpu_poll": 0}
    assert s.candidates[2].knob_dict == {"cpu_threads": 2, "cpu_poll": 100}
    assert s.design.kind == "blocks" and s.design.blocks == 3 and len(s.design.arms) == 4
    assert s.pick.min_wins == 2 and s.confirm.stop_when_decided


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("[grid]\ncpu_poll = [50, 100]\n", ""), ""),  # the list alone is a screen
        (("min_wins = 2", "min_wins = 4"), r"<screen>:\d+: pick.min_wins: must be at most 3"),
        (("repeats = 3", "repeats = 1"), r"<screen>:\d+: repeats: must be at least 2"),
        (('name = "one-thread"', 'name = "default"'), r"candidates\[0\].name: 'default' is used twice"),
        (("cpu_threads = 1 }", "cpu_threads = 2 }"), r"candidates\[0\].knobs: 'one-thread' is the control's setting"),
        (("effect_pct = 5", "effect_pct = 0"), r"<screen>:\d+: confirm.effect_pct: must be between 0 and 100"),
        (('name = "time_per_verify_step"', 'name = "speed"'), r"<screen>:\d+: measure.name: 'speed' is not one of"),
        (("repeats = 3", "repeats = 3\nblocks = 4"), r"<screen>:\d+: blocks: unknown field"),
        (("cpu_poll = [50, 100]", "cpu_poll = 50"), r"<screen>:\d+: grid.cpu_poll: expected an array"),
    ],
)
def test_a_wrong_field_is_refused_with_its_line(change: tuple[str, str], message: str) -> None:
    text = SCREEN.replace(*change)
    if not message:
        assert len(parse_screen_text(text).candidates) == 1
        return
    with pytest.raises(DesignError, match=message):
        parse_screen_text(text)


def test_a_knob_the_profile_lacks_is_refused_at_registration(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(SCREEN.replace("cpu_threads = 1 }", "cpu_threads = 1, no_such_knob = 3 }"))
    with pytest.raises(FrankError, match="no_such_knob"):
        register_screen(path)


def _values(table: dict[str, list[float]]) -> dict[tuple[int, str], float]:
    return {(r + 1, name): v for name, vals in table.items() for r, v in enumerate(vals)}


def test_the_pick_is_the_best_median_among_candidates_that_beat_the_control_often_enough() -> None:
    s = parse_screen_text(SCREEN)
    values = _values(
        {
            "default": [10.0, 10.0, 10.0],
            "one-thread": [5.0, 11.0, 12.0],  # the best median of all? no: 11; and it won once only
            "cpu_poll.50": [9.0, 9.5, 10.5],  # won twice: qualifies, median 9.5
            "cpu_poll.100": [9.8, 9.9, 9.7],  # won three times: qualifies, median 9.8
        }
    )
    r = analyze_screen(s, values)
    assert r.complete and r.pick == "cpu_poll.50"
    wins = {x.name: (x.wins, x.qualifies) for x in r.settings}
    assert wins["one-thread"] == (1, False) and wins["cpu_poll.50"] == (2, True) and wins["cpu_poll.100"] == (3, True)
    assert "the lowest median (9.5) of the 2 candidates" in r.pick_reason
    assert r.spread_pct is not None and r.spread_effects == 6
    # a lone very low value does not win it: the control stays when nobody qualifies
    none = analyze_screen(
        s, _values({"default": [1, 1, 1], "one-thread": [0.5, 2, 2], "cpu_poll.50": [2] * 3, "cpu_poll.100": [2] * 3})
    )
    assert none.pick is None and "default stays" in none.pick_reason
    # nothing is picked before every cell is measured
    partial = analyze_screen(s, {k: v for k, v in values.items() if k[0] < 3})
    assert not partial.complete and partial.pick is None and "cpu_poll" in partial.pick_reason


class ScreenCells(FakeCellExecutor):
    """Values by setting: cpu_poll.100 is 10% faster than the default in every repeat."""

    def execute(self, run: Any, slot: Slot, attempt: int, note: Any) -> CellResult:
        out = super().execute(run, slot, attempt, note)
        base = {"default": 1.0, "one-thread": 1.2, "cpu_poll.50": 1.02, "cpu_poll.100": 0.9}[slot.arm]
        return replace(out, value=base * (1 + 0.01 * (slot.block or 0)))


def _screen_run(tmp_path: Path) -> registry.Run:
    path = tmp_path / "screen.toml"
    path.write_text(SCREEN)
    run = register_screen(path, seed=3)
    assert run_experiment(run, ScreenCells()).reason == "finished"
    return run


def test_a_screen_runs_as_a_registered_run_and_writes_its_confirmation(tmp_path: Path) -> None:
    run = _screen_run(tmp_path)
    assert run.meta["kind"] == "screen" and (run.folder / "screen.toml").exists()
    assert len(run.slots) == 12 and {s.block for s in run.slots} == {1, 2, 3}
    assert all(
        sorted(s.arm for s in run.slots if s.block == b) == sorted(a.name for a in run.design.arms) for b in (1, 2, 3)
    )
    again = registry.load_run(run.run_id)  # the frozen copy is verified like a design's
    assert again.design.sha256 == run.design.sha256
    rec = record_for_run(run)
    assert rec.result.pick == "cpu_poll.100"
    conf = rec.confirmation
    assert conf is not None
    design = parse_design_text(conf.design_toml)
    assert [a.name for a in design.arms] == ["default", "cpu_poll.100"]
    assert design.arm("cpu_poll.100").knob_dict == {"cpu_threads": 2, "cpu_poll": 100}
    assert design.rule.treatment == "cpu_poll.100" and design.rule.require_all and design.stop_when_decided
    assert 5 <= design.blocks <= 9 and design.blocks == conf.blocks
    assert design.workload == run.design.workload and design.measure == "time_per_verify_step"
    # registrable as it is
    out = tmp_path / "confirm.toml"
    out.write_text(conf.design_toml)
    assert registry.register(out).design.sha256 == conf.design_sha256


def test_the_record_is_decided_again_from_the_file_and_refuses_forgeries(tmp_path: Path) -> None:
    rec = record_for_run(_screen_run(tmp_path))
    path = tmp_path / "rec.json"
    write_json(path, rec)
    assert read_record(path).result == rec.result
    # a cell's value changed, its seal kept: refused at that cell (tests/unit/test_sealed_records.py has more)
    forged = json.loads(path.read_text())
    first = next(i for i, cell in enumerate(forged["cells"]) if cell["setting"] == "cpu_poll.50")
    forged["cells"][first]["value"] = 0.5
    path.write_text(json.dumps(forged, indent=1))
    with pytest.raises(ScreenRecordError, match=rf"cells\[{first}\]\.value: 'cpu_poll.50' in repeat \d: its values"):
        read_record(path)
    # the screen's rule altered: its hash no longer matches
    forged = json.loads(json.dumps(rec.to_json()))
    forged["screen_toml"] = forged["screen_toml"].replace("min_wins = 2", "min_wins = 1")
    path.write_text(json.dumps(forged))
    with pytest.raises(ScreenRecordError, match="screen_sha256: .* altered"):
        read_record(path)
    # one cell twice (a better value added beside the real one)
    twice = json.loads(json.dumps(rec.to_json()))
    twice["cells"].append({**twice["cells"][0], "value": 0.1})
    path.write_text(json.dumps(twice))
    with pytest.raises(ScreenRecordError, match=r"cells\[12\]: .* measured twice"):
        read_record(path)


def test_a_screen_is_never_evidence(tmp_path: Path) -> None:
    run = _screen_run(tmp_path)
    with pytest.raises(FrankError, match="is a screen: .* never evidence"):
        run_report(run.run_id)


def test_the_report_of_a_screen_run_is_its_pick_not_a_decision(tmp_path: Path, frank_cli) -> None:
    run = _screen_run(tmp_path)
    shown = frank_cli("experiment", "report", run.run_id, "--json", timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["result"]["pick"] == "cpu_poll.100"
    refused = frank_cli("experiment", "report", run.run_id, "--csv", str(tmp_path / "x.csv"), timeout=120)
    assert refused.returncode != 0 and "is a screen" in refused.stderr


@pytest.mark.parametrize(
    ("after", "field"),
    [
        ('name = "default"', "control.colour"),
        ('name = "one-thread"', "candidates[0].colour"),
        ('name = "time_per_verify_step"', "measure.colour"),
        ("min_wins = 2", "pick.colour"),
        ("effect_pct = 5", "confirm.colour"),
        ("max_tokens = 8", "workload.colour"),  # checked as a design's [workload], at its line in the screen
        ("repeats = 3", "colour"),
    ],
)
def test_an_unknown_key_of_a_screen_is_refused_at_its_line(after: str, field: str) -> None:
    text = SCREEN.replace(after, f"{after}\ncolour = 1", 1)
    line = next(n for n, text_line in enumerate(text.splitlines(), 1) if text_line.startswith("colour"))
    with pytest.raises(DesignError) as err:
        parse_screen_text(text, "s.toml")
    assert str(err.value).startswith(f"s.toml:{line}: {field}: unknown field (known: "), str(err.value)


def test_a_screens_problems_are_refused_at_once() -> None:
    text = SCREEN.replace("cpu_threads = 1 }", "cpu_threads = 1 }\nweight = 2").replace(
        "min_wins = 2", 'min_wins = 2\nrule = "best_mean"'
    )
    with pytest.raises(DesignError) as err:
        parse_screen_text(text, "s.toml")
    lines = str(err.value).splitlines()
    assert len(lines) == 2, lines
    assert "candidates[0].weight: unknown field" in lines[0]
    assert "pick.rule: 'best_mean' is not one of: best_median" in lines[1]
