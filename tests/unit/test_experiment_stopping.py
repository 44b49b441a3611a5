"""Stopping when decided (frank.experiments.stopping): a stop is declared exactly when no completion of the
remaining blocks (starts) can change the frozen rule's verdict, checked against the full analysis of every
completion; the runner stops there, records why, and a run killed around the stop resumes to the same end."""

from __future__ import annotations

import itertools
import json
import random
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from frank.experiments import registry
from frank.experiments.analysis import analyze
from frank.experiments.design import parse_design_text
from frank.experiments.journal import CellResult, read_events
from frank.experiments.observations import Observation
from frank.experiments.randomize import Slot
from frank.experiments.report import report_for_run
from frank.experiments.results_csv import read_results_csv, results_csv_for_run
from frank.experiments.runner import run_experiment
from frank.experiments.stopping import balanced_stop, blocks_stop
from frank.experiments.tables import DesignError
from frank.experiments.tally import tally_blocks
from tests.unit.experiment_helpers import BALANCED_DESIGN, BLOCKS_DESIGN
from tests.unit.test_experiment_runner import FakeCellExecutor


@pytest.fixture(autouse=True)
def frank_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FRANK_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def blocks_design(blocks: int, rule: str = "", stop: bool = True) -> Any:
    text = BLOCKS_DESIGN.replace("blocks = 3", f"blocks = {blocks}" + ("\nstop_when_decided = true" if stop else ""))
    if rule:
        text = text.replace('direction = "lower"', f'direction = "lower"\n{rule}')
    return parse_design_text(text)


def balanced_design(n: int, stop: bool = True) -> Any:
    text = BALANCED_DESIGN.replace(
        "starts_per_arm = 3", f"starts_per_arm = {n}" + ("\nstop_when_decided = true" if stop else "")
    )
    return parse_design_text(text)


def _block_obs(outcomes: list[str]) -> list[Observation]:
    """Blocks 1..len(outcomes): "+" spec-2 (the treatment) lower, "-" higher, "=" a tie."""
    obs, start = [], 0
    for block, o in enumerate(outcomes, 1):
        t = {"+": 1.0, "-": 2.0, "=": 1.5}[o]
        for arm, value in (("spec-2", t), ("spec-4", 1.5)):
            start += 1
            obs.append(Observation(start=start, block=block, arm=arm, value=value, measure="time_per_verify_step"))
    return obs


def _verdict(design: Any, outcomes: list[str]) -> str:
    return analyze(design, _block_obs(outcomes), source="external").verdict


RULES = [
    ("", 8),  # require_all: the seed's rule
    ("require_all = false\nalpha = 0.05", 8),  # a threshold only: out of reach, or reached whatever comes
    ("alpha = 0.05", 6),  # both
]


@pytest.mark.parametrize(("rule", "k"), RULES)
def test_a_stop_is_declared_exactly_when_no_completion_changes_the_verdict(rule: str, k: int) -> None:
    full = blocks_design(k, rule, stop=False)
    stopping = blocks_design(k, rule)
    rng = random.Random(20261204)
    stops = 0
    for _ in range(25):
        outcomes = [rng.choice("++-=") if rng.random() < 0.8 else "+" for _ in range(k)]
        for n in range(1, k):
            prefix = outcomes[:n]
            finals = {_verdict(full, prefix + list(rest)) for rest in itertools.product("+-", repeat=k - n)}
            values: dict[int, dict[str, float | None]] = {}
            for o in _block_obs(prefix):
                values.setdefault(o.block or 0, {})[o.arm] = o.value
            tally = tally_blocks(stopping, values)
            stop = blocks_stop(stopping, tally)
            if len(finals) == 1:
                assert stop is not None, (outcomes, n)
                assert stop.verdict == finals.pop() and stop.after == n and stop.left == k - n
                stops += 1
                # the analysis of the prefix alone says the same, with the p of the finished blocks
                r = analyze(stopping, _block_obs(prefix), source="external")
                assert r.verdict == stop.verdict and r.stopped_when_decided.after == n
                assert r.blocks.complete == n and r.p_fraction is not None
                break
            assert stop is None, (outcomes, n, finals)
    assert stops > 10


def test_the_seed_rule_stops_at_the_first_loss_with_the_p_of_the_blocks_run() -> None:
    design = blocks_design(8)
    r = analyze(design, _block_obs(["+", "-"]), source="external")
    assert r.verdict == "not confirmed"
    assert r.stopped_when_decided.after == 2 and r.stopped_when_decided.left == 6
    assert r.p_fraction == "3/4" and r.blocks.wins == 1 and r.blocks.losses == 1
    assert "stopped when decided after block 2 of 8" in r.decision.reason
    assert "the rule needs all 8" in r.decision.reason
    # a tie is not a win: it decides too
    assert analyze(design, _block_obs(["="]), source="external").verdict == "not confirmed"
    # wins alone never decide a require-all rule early
    assert analyze(design, _block_obs(["+"] * 7), source="external").verdict == "incomplete"


def test_a_gap_before_the_last_block_is_not_a_stop() -> None:
    """A results file that leaves out a block in the middle (an unfavourable one, say) is incomplete, not
    stopped: a stop is only ever the prefix of the order the runner ran."""
    design = blocks_design(8, "require_all = false\nalpha = 0.05")
    obs = [o for o in _block_obs(["+"] * 8) if o.block not in (3,)]
    r = analyze(design, obs, source="external")
    assert r.verdict == "incomplete" and r.stopped_when_decided is None
    # the same blocks without the gap, stopped after the seventh win, would be decided
    assert analyze(design, _block_obs(["+"] * 7), source="external").verdict == "confirmed"


def test_a_balanced_stop_holds_for_every_completion_and_is_never_declared_early() -> None:
    design = balanced_design(4)
    full = balanced_design(4, stop=False)
    rng = random.Random(7)
    stops = 0
    for trial in range(15):
        arms = ["on"] * 4 + ["off"] * 4
        rng.shuffle(arms)
        values = [rng.gauss(1.0 if a == "on" else 1.3, 0.25) for a in arms]
        for n in range(1, 8):
            starts = [(i + 1, arms[i], values[i]) for i in range(n)]
            stop = balanced_stop(design, starts)
            rest = list(range(n, 8))
            # completions: random values and the far corners, for the starts still to run
            completions = [[rng.gauss(1.15, 0.6) for _ in rest] for _ in range(6)]
            for far in (-1e3, 1e3):
                completions.append([far if arms[i] == "on" else -far for i in rest])
            verdicts = set()
            for fill in completions:
                obs = [
                    Observation(start=s, block=None, arm=a, value=v, measure="front_end_per_draw") for s, a, v in starts
                ]
                obs += [
                    Observation(start=i + 1, block=None, arm=arms[i], value=f, measure="front_end_per_draw")
                    for i, f in zip(rest, fill, strict=True)
                ]
                verdicts.add(analyze(full, obs, source="external").verdict)
            if stop is not None:
                assert verdicts == {stop.verdict}, (trial, n)
                assert stop.verdict == "not confirmed" and stop.after == n
                stops += 1
                break
    assert stops > 2


def test_the_field_is_refused_where_nothing_can_stop() -> None:
    ext = """
name = "x"
question = "q"
[[arms]]
name = "a"
[[arms]]
name = "b"
[design]
kind = "external"
stop_when_decided = true
[rule]
test = "criteria"
treatment = "a"
control = "b"
[[rule.criteria]]
measure = "m"
compare = "lower"
"""
    with pytest.raises(DesignError, match=r"<design>:10: design.stop_when_decided: only a runnable design"):
        parse_design_text(ext)
    with pytest.raises(DesignError, match="stop_when_decided"):
        parse_design_text(BLOCKS_DESIGN.replace("blocks = 3", 'blocks = 3\nstop_when_decided = "yes"'))
    # the field is part of the frozen rule: it changes the design's hash; its absence keeps old hashes
    assert blocks_design(3).sha256 != blocks_design(3, stop=False).sha256
    assert blocks_design(3, stop=False).sha256 == parse_design_text(BLOCKS_DESIGN).sha256


# -- the runner ---------------------------------------------------------------------------------------


class LosingInBlock(FakeCellExecutor):
    """The treatment (spec-2) is lower in every block but `losing_block`."""

    def __init__(self, losing_block: int) -> None:
        super().__init__()
        self.losing_block = losing_block

    def execute(self, run: Any, slot: Slot, attempt: int, note: Any) -> CellResult:
        out = super().execute(run, slot, attempt, note)
        treated = slot.arm == "spec-2"
        return replace(out, value=(2.0 if slot.block == self.losing_block else 1.0) if treated else 1.5)


def _register(tmp_path: Path, blocks: int = 8) -> registry.Run:
    path = tmp_path / "design.toml"
    path.write_text(BLOCKS_DESIGN.replace("blocks = 3", f"blocks = {blocks}\nstop_when_decided = true"))
    return registry.register(path, seed=11)


def test_the_runner_stops_after_the_deciding_block_and_says_why(tmp_path: Path) -> None:
    run = _register(tmp_path)
    fake = LosingInBlock(2)
    result = run_experiment(run, fake)
    assert result.reason == "finished" and result.cells_run == 4
    assert "stopped when decided after block 2 of 8" in result.message
    assert sorted(c[0] for c in fake.calls) == [0, 1, 2, 3], "no cell of blocks 3-8 ran"
    events = read_events(run.journal_path)
    decided = [e for e in events if e["event"] == "decided"]
    assert len(decided) == 1 and decided[0]["verdict"] == "not confirmed" and decided[0]["after"] == 2
    assert events[-1]["event"] == "runner_stopped" and events[-1]["reason"] == "finished"
    report = report_for_run(run)
    assert report.verdict == "not confirmed" and report.p_fraction == "3/4"
    saved = report.cost_not_spent
    assert saved is not None and saved.starts_run == 4 and saved.starts_not_run == 12
    # the CSV of the stopped run is decided again the same, from the file alone
    csv = tmp_path / "run.csv"
    csv.write_text(results_csv_for_run(run))
    again = analyze(run.design, read_results_csv(csv, run.design), source="external")
    assert again.verdict == "not confirmed" and again.stopped_when_decided.after == 2
    # a second runner on the stopped run runs nothing and records no second decision
    assert run_experiment(run, fake).cells_run == 0
    assert len([e for e in read_events(run.journal_path) if e["event"] == "decided"]) == 1


def test_a_run_killed_around_the_stop_resumes_to_the_same_end(tmp_path: Path) -> None:
    run = _register(tmp_path)
    run_experiment(run, LosingInBlock(2))
    lines = run.journal_path.read_bytes().splitlines(keepends=True)
    for keep in range(1, len(lines) + 1):
        folder = run.folder.parent / f"{run.run_id}-cut{keep}"
        shutil.copytree(run.folder, folder)
        (folder / "journal.jsonl").write_bytes(b"".join(lines[:keep]))
        copy = registry.load_run(folder.name)
        fake = LosingInBlock(2)
        result = run_experiment(copy, fake)
        events = read_events(copy.journal_path)
        assert result.reason == "finished", keep
        assert {e["slot"] for e in events if e["event"] == "cell_done"} == {0, 1, 2, 3}, keep
        assert all(c[0] < 4 for c in fake.calls), f"a block after the decision ran (cut at {keep})"
        assert len([e for e in events if e["event"] == "decided"]) == 1, keep
        assert report_for_run(copy).stopped_when_decided.after == 2
    assert json.loads(lines[-2])["event"] == "decided"
