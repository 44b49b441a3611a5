"""The runner's resume logic, with the engine replaced by an injected FakeCellExecutor (real engine starts
are covered by tests/integration/test_experiment_e2e.py)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from frank.experiments import registry
from frank.experiments.board import load_state
from frank.experiments.journal import CellResult, Journal, read_events
from frank.experiments.randomize import Slot
from frank.experiments.report import report_for_run
from frank.experiments.runner import CellError, RunLock, RunnerInterrupted, lock_holder, run_experiment
from tests.unit.experiment_helpers import BALANCED_DESIGN, BLOCKS_DESIGN


@pytest.fixture(autouse=True)
def frank_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FRANK_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def fake_value(slot: Slot) -> float:
    base = 1.0 if slot.arm in ("spec-2", "on") else 1.5
    return base + 0.01 * (slot.block or slot.slot)


class FakeCellExecutor:
    """Stands in for the engine: deterministic values, and failures or interruptions on demand."""

    def __init__(
        self, fail: dict[tuple[int, int], BaseException] | None = None, hashes: dict[int, str] | None = None
    ) -> None:
        self.fail = fail or {}
        self.hashes = hashes or {}
        self.calls: list[tuple[int, int]] = []
        self.cleanups: list[tuple[int, int]] = []

    def precheck(self, run: Any) -> None:
        pass

    def cleanup(self, run: Any, attempt: Any) -> str:
        self.cleanups.append((attempt.slot, attempt.attempt))
        return "no engine was left"

    def execute(self, run: Any, slot: Slot, attempt: int, note: Any) -> CellResult:
        self.calls.append((slot.slot, attempt))
        note("engine_ready", slot=slot.slot, attempt=attempt, pid=0, ready_s=0.0)
        if (slot.slot, attempt) in self.fail:
            raise self.fail[(slot.slot, attempt)]
        note("replay_done", slot=slot.slot, attempt=attempt, requests=2, failed=0)
        note("engine_stopped", slot=slot.slot, attempt=attempt)
        return CellResult(
            value=fake_value(slot),
            failed=0,
            requests=2,
            prompt_hashes={"d1/r1": self.hashes.get(slot.slot, "h1"), "d1/r2": "h2"},
        )


def _register(tmp_path: Path, text: str = BLOCKS_DESIGN, seed: int = 7) -> registry.Run:
    path = tmp_path / "design.toml"
    path.write_text(text)
    return registry.register(path, seed=seed)


def test_full_run_and_report(tmp_path: Path) -> None:
    run = _register(tmp_path)
    fake = FakeCellExecutor()
    result = run_experiment(run, fake)
    assert result.reason == "finished" and result.cells_run == 6
    assert [c[0] for c in fake.calls] == [0, 1, 2, 3, 4, 5]
    report = report_for_run(run)
    for key in ("design_sha256", "order", "blocks", "p_value", "null_size", "decision"):
        assert key in report.to_json()
    assert report.design_sha256 == run.design.sha256
    assert [o["arm"] for o in report.order] == [s.arm for s in run.slots]
    assert report.verdict == "confirmed" and report.p_value == pytest.approx(1 / 8)
    assert report.blocks.blocks[0].effect_pct == pytest.approx((1.01 - 1.51) / 1.51 * 100)
    assert [g.status for g in report.guards] == ["pass"]
    state = load_state(run)
    assert state.status == "finished" and state.wins == 3 and state.remaining == 0 and state.can_still_meet


def _truncated_copy(run: registry.Run, lines: list[bytes], keep: int, torn: bool) -> registry.Run:
    folder = run.folder.parent / f"{run.run_id}-cut{keep}{'t' if torn else ''}"
    shutil.copytree(run.folder, folder)
    data = b"".join(lines[:keep])
    if torn and keep < len(lines):
        data += lines[keep][: len(lines[keep]) // 2]  # killed in the middle of writing the next event
    (folder / "journal.jsonl").write_bytes(data)
    return registry.load_run(folder.name)


@pytest.mark.parametrize("torn", [False, True])
def test_resume_after_a_kill_at_every_event(tmp_path: Path, torn: bool) -> None:
    run = _register(tmp_path)
    run_experiment(run, FakeCellExecutor())
    lines = run.journal_path.read_bytes().splitlines(keepends=True)
    expected = {s.slot: fake_value(s) for s in run.slots}
    kinds = set()
    cut_mid_cell = 0
    for keep in range(1, len(lines) + 1):
        prefix = [json.loads(line) for line in lines[:keep]]
        kinds.add(prefix[-1]["event"])
        done_before = {e["slot"] for e in prefix if e["event"] == "cell_done"}
        open_before = [e for e in prefix if e["event"] == "cell_started" and e["slot"] not in done_before]
        copy = _truncated_copy(run, lines, keep, torn)
        fake = FakeCellExecutor()
        result = run_experiment(copy, fake)
        assert result.reason == "finished", keep
        after = copy.journal_path.read_bytes()
        assert after.startswith(b"".join(lines[:keep])), "nothing recorded is lost or rewritten"
        events = read_events(copy.journal_path)
        done = {e["slot"]: e for e in events if e["event"] == "cell_done"}
        assert {k: v["value"] for k, v in done.items()} == expected
        assert len([e for e in events if e["event"] == "cell_done"]) == 6, "no cell is measured twice"
        assert {c[0] for c in fake.calls} == set(range(6)) - done_before, "done cells are not redone"
        if open_before:
            cut_mid_cell += 1
            cut = open_before[-1]
            assert fake.cleanups == [(cut["slot"], cut["attempt"])]
            assert fake.calls[0] == (cut["slot"], cut["attempt"] + 1), "redone from its engine start"
            assert any(e["event"] == "cell_interrupted" and e["slot"] == cut["slot"] for e in events)
        else:
            assert fake.cleanups == []
    assert cut_mid_cell == 6 * 4  # after cell_started, engine_ready, replay_done, engine_stopped
    assert {
        "registered",
        "runner_started",
        "cell_started",
        "engine_ready",
        "replay_done",
        "engine_stopped",
        "cell_done",
        "runner_stopped",
    } <= kinds


def test_failure_rule_retry_then_exhausted(tmp_path: Path) -> None:
    run = _register(tmp_path)
    fake = FakeCellExecutor(fail={(1, 1): CellError("engine crashed"), (1, 2): CellError("engine crashed again")})
    result = run_experiment(run, fake)
    assert result.reason == "retries_exhausted"
    assert fake.calls == [(0, 1), (1, 1), (1, 2)]
    state = load_state(run)
    assert state.status == "failed" and state.cells[1].status == "failed" and state.cells[1].attempts == 2
    again = run_experiment(run, FakeCellExecutor())  # the frozen rule allows no third attempt
    assert again.reason == "retries_exhausted" and again.cells_run == 0
    report = report_for_run(run)
    assert report.verdict == "incomplete"
    assert [a["status"] for a in report.run.attempts["2"]] == ["failed", "failed"]


def test_failure_rule_retry_succeeds(tmp_path: Path) -> None:
    run = _register(tmp_path)
    fake = FakeCellExecutor(fail={(3, 1): CellError("engine did not start")})
    assert run_experiment(run, fake).reason == "finished"
    assert (3, 2) in fake.calls and report_for_run(run).verdict == "confirmed"


def test_failure_rule_void_block(tmp_path: Path) -> None:
    text = BLOCKS_DESIGN.replace('action = "retry"\nmax_retries = 1', 'action = "void_block"')
    run = _register(tmp_path, text)
    fake = FakeCellExecutor(fail={(2, 1): CellError("engine crashed")})
    assert run_experiment(run, fake).reason == "finished"
    block = run.slots[2].block
    assert not any(c[0] in (2, 3) and c[1] > 1 for c in fake.calls)
    events = read_events(run.journal_path)
    assert [e["block"] for e in events if e["event"] == "block_voided"] == [block]
    state = load_state(run)
    assert state.blocks[block - 1].voided and not state.can_still_meet
    report = report_for_run(run)
    assert report.verdict == "not confirmed" and report.blocks.voided == (block,)
    assert "in 2 of 3 blocks" in report.decision.reason


def test_interrupt_records_the_cut_cell_and_resume_redoes_it(tmp_path: Path) -> None:
    run = _register(tmp_path)
    first = FakeCellExecutor(fail={(2, 1): RunnerInterrupted("stopped by SIGTERM")})
    result = run_experiment(run, first)
    assert result.reason == "interrupted"
    events = read_events(run.journal_path)
    assert [e["event"] for e in events[-2:]] == ["cell_interrupted", "runner_stopped"]
    assert load_state(run).status == "stopped"
    second = FakeCellExecutor()
    assert run_experiment(run, second).reason == "finished"
    assert second.calls[0] == (2, 2) and second.cleanups == []
    assert report_for_run(run).run.attempts["3"][0]["status"] == "interrupted"


def test_a_time_limit_stops_between_cells_and_the_next_runner_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--stop-after`: no cell starts after the limit; nothing is interrupted, no retry is spent, and a
    later runner does exactly the cells that are left (a GPU machine lent call by call)."""
    import frank.experiments.runner as runner_mod

    clock = [1000.0]
    monkeypatch.setattr(runner_mod.time, "time", lambda: clock[0])

    class Ticking(FakeCellExecutor):
        def execute(self, run: Any, slot: Slot, attempt: int, note: Any) -> CellResult:
            clock[0] += 60.0  # each cell takes a minute
            return super().execute(run, slot, attempt, note)

    run = _register(tmp_path)
    first = Ticking()
    result = run_experiment(run, first, stop_by=1000.0 + 150.0)
    assert result.reason == "time_limit" and result.cells_run == 3  # started at 0, 60 and 120 s; not at 180
    assert "before start 4; 3 left" in result.message
    events = read_events(run.journal_path)
    assert events[-1]["event"] == "runner_stopped" and events[-1]["reason"] == "time_limit"
    assert not any(e["event"] in ("cell_interrupted", "cell_failed") for e in events)
    assert load_state(run).status == "stopped"
    second = Ticking()
    assert run_experiment(run, second, stop_by=clock[0] + 10_000).reason == "finished"
    assert second.calls == [(3, 1), (4, 1), (5, 1)], "the cells left, each at its first attempt"
    assert report_for_run(run).verdict == "confirmed"
    (tmp_path / "late").mkdir()
    late = _register(tmp_path / "late")
    assert run_experiment(late, Ticking(), stop_by=clock[0] - 1).cells_run == 0  # already past: starts none


def test_two_runners_never_run_one_experiment(tmp_path: Path) -> None:
    run = _register(tmp_path)
    with RunLock(run.lock_path):
        assert lock_holder(run.lock_path) is not None
        with pytest.raises(registry.RunError, match="another runner .* is running this experiment"):
            run_experiment(run, FakeCellExecutor())
    assert lock_holder(run.lock_path) is None
    assert run_experiment(run, FakeCellExecutor()).reason == "finished"


def test_run_refuses_an_altered_frozen_copy(tmp_path: Path) -> None:
    run = _register(tmp_path)
    frozen = run.folder / "design.toml"
    frozen.write_text(frozen.read_text().replace("blocks = 3", "blocks = 2"))
    with pytest.raises(registry.RunError, match="altered after registration"):
        registry.load_run(run.run_id)
    run2 = _register(tmp_path, seed=8)
    meta = json.loads((run2.folder / "run.json").read_text())
    meta["order"]["slots"].reverse()
    (run2.folder / "run.json").write_text(json.dumps(meta))
    with pytest.raises(registry.RunError, match="order differs from the one recorded at registration"):
        registry.load_run(run2.run_id)
    # a comment-only edit changes the bytes but not the canonical form: still refused
    run3 = _register(tmp_path, seed=9)
    (run3.folder / "design.toml").write_text("# edited\n" + (run3.folder / "design.toml").read_text())
    with pytest.raises(registry.RunError, match="source hash mismatch"):
        registry.load_run(run3.run_id)


def test_registration_records_seed_order_and_hash(tmp_path: Path) -> None:
    run = _register(tmp_path, seed=42)
    meta = run.meta
    assert meta["order"]["seed"] == "42" and meta["order"]["count"] == 8
    assert meta["design_sha256"] == run.design.sha256 and meta["smallest_p"] == pytest.approx(1 / 8)
    assert oct(run.folder.stat().st_mode & 0o777) == "0o700"
    assert read_events(run.journal_path)[0]["event"] == "registered"
    assert registry.load_run(run.run_id[:22]).run_id == run.run_id  # a unique prefix works


def test_live_state_tracks_signs_and_whether_the_rule_can_be_met(tmp_path: Path) -> None:
    run = _register(tmp_path)
    first_block = [s.slot for s in run.slots if s.block == 1]
    fake = FakeCellExecutor(fail={(first_block[1] + 1, 1): RunnerInterrupted("stop")})
    run_experiment(run, fake)
    state = load_state(run)
    assert state.blocks[0].sign == "+" and state.wins == 1 and state.remaining == 2
    assert state.can_still_meet and state.best_possible_p == pytest.approx(1 / 8)
    assert state.cells[first_block[1] + 1].status == "interrupted"


def test_best_possible_p_of_a_balanced_run_keeps_the_measured_order(tmp_path: Path) -> None:
    # five of six starts measured, every treatment value below every control value: the last start can
    # still make it the most extreme of the 20 relabellings, so the best possible p is 1/20
    run = _register(tmp_path, BALANCED_DESIGN)
    last = run.slots[-1].slot
    run_experiment(run, FakeCellExecutor(fail={(last, 1): RunnerInterrupted("stop")}))
    state = load_state(run)
    assert sum(c.value is not None for c in state.cells) == 5
    assert state.can_still_meet and state.best_possible_p == pytest.approx(1 / 20)


def test_balanced_run_guard_on_prompt_ids(tmp_path: Path) -> None:
    run = _register(tmp_path, BALANCED_DESIGN)
    assert run_experiment(run, FakeCellExecutor()).reason == "finished"
    report = report_for_run(run)
    assert report.verdict == "confirmed" and report.p_value == pytest.approx(1 / 20)
    assert report.null_size == 20 and len(report.starts) == 6
    run2 = _register(tmp_path, BALANCED_DESIGN, seed=3)
    run_experiment(run2, FakeCellExecutor(hashes={4: "different"}))
    report2 = report_for_run(run2)
    assert report2.verdict == "not confirmed"
    assert "guard failed: prompt_token_ids_identical" in report2.decision.reason


def test_detached_runner_is_its_own_session_and_records_why_it_stopped(
    tmp_path: Path, frank_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run --detach` (how the console launches it) survives its parent: own session, output to the run
    folder. Its workload is missing here, so it stops before any engine start, and says why in the journal."""
    import os
    import time

    from frank.console.cli import main

    run = _register(tmp_path, BLOCKS_DESIGN.replace('name = "tiny"', 'name = "no-such-workload"'))
    assert main(["experiment", "run", run.run_id, "--detach", "--json"]) == 0
    pid = json.loads(capsys.readouterr().out)["pid"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
        e["event"] == "runner_stopped" for e in read_events(run.journal_path)
    ):
        time.sleep(0.2)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    events = read_events(run.journal_path)
    assert [e["event"] for e in events] == ["registered", "runner_started", "runner_stopped"]
    assert events[1]["pid"] == pid and events[1]["sid"] == pid, "a session of its own (an SSH drop cannot reach it)"
    assert events[2]["reason"] == "error" and "workload.name: no workload 'no-such-workload'" in events[2]["message"]
    assert "workload.name" in run.log_path.read_text()
    assert lock_holder(run.lock_path) is None


def _same_tally(run: registry.Run) -> tuple[int, int, int, float | None]:
    """The live board's tally and the report's, which must agree."""
    state, report = load_state(run), report_for_run(run)
    live = (state.wins, state.losses, state.ties, state.p_value)
    decided = (report.blocks.wins, report.blocks.losses, report.blocks.ties, report.p_value)
    assert live == decided, f"live board {live} != report {decided}"
    assert [b.sign for b in state.blocks] == [b.sign for b in report.blocks.blocks]
    assert [b.voided for b in state.blocks] == [b.voided for b in report.blocks.blocks]
    return live


def test_live_board_and_report_tally_a_voided_block_alike(tmp_path: Path) -> None:
    # a journal in which block 2's cells both finished (the treatment lost) and the block was then voided:
    # under the frozen rule it counts in neither tally, on the board as in the decision
    run = _register(tmp_path)
    with Journal(run.journal_path) as journal:
        journal.append("runner_started", pid=1, resumed=False)
        for slot in run.slots:
            journal.append("cell_started", slot=slot.slot, attempt=1, arm=slot.arm, block=slot.block)
            value = fake_value(slot) if slot.block != 2 else (2.0 if slot.arm == "spec-2" else 1.0)
            journal.append(
                "cell_done", slot=slot.slot, attempt=1, arm=slot.arm, block=slot.block, value=value, failed=0
            )
        journal.append("block_voided", block=2, slot=run.slots[-1].slot, reason="voided by hand")
        journal.append("runner_stopped", reason="finished")
    assert _same_tally(run) == (2, 0, 0, pytest.approx(1 / 4))
    assert load_state(run).remaining == 0 and report_for_run(run).verdict == "not confirmed"  # 2 of 3


def test_live_board_and_report_agree_at_every_point_of_a_run_with_a_voided_block(tmp_path: Path) -> None:
    text = BLOCKS_DESIGN.replace('action = "retry"\nmax_retries = 1', 'action = "void_block"')
    run = _register(tmp_path, text)
    second_of_block_2 = [s.slot for s in run.slots if s.block == 2][1]
    assert run_experiment(run, FakeCellExecutor(fail={(second_of_block_2, 1): CellError("crash")})).reason == "finished"
    lines = run.journal_path.read_bytes().splitlines(keepends=True)
    for keep in range(1, len(lines) + 1):  # the board as it was after each event, against the report then
        _same_tally(_truncated_copy(run, lines, keep, torn=False))
    assert _same_tally(run) == (2, 0, 0, pytest.approx(1 / 4)) and load_state(run).blocks[1].voided


def test_a_finished_run_exported_as_csv_is_decided_again_the_same(tmp_path: Path) -> None:
    """`frank experiment report RUN --csv`: the campaign's path from a registered run to `results = ...`
    evidence. The CSV names the run and the design hash; analyzing it gives the run's decision and p; a CSV
    of another design is refused with its line; campaign status names the run it came from."""
    from frank.campaign.evidence import check_evidence
    from frank.campaign.parts import load_campaign
    from frank.console.cli import main
    from frank.experiments.analysis import analyze
    from frank.experiments.design import load_design
    from frank.experiments.errors import ResultsError
    from frank.experiments.results_csv import read_results_csv

    run = _register(tmp_path)
    run_experiment(run, FakeCellExecutor())
    csv_path = tmp_path / "exported.csv"
    assert main(["experiment", "report", run.run_id, "--csv", str(csv_path)]) == 0
    text = csv_path.read_text()
    assert f"# run: {run.run_id}" in text and f"# design-sha256: {run.design.sha256}" in text
    assert "# guard in the run: " in text and "# decided in the run: confirmed, p = 1/8" in text
    design = load_design(tmp_path / "design.toml")
    again, original = analyze(design, read_results_csv(csv_path, design), source="external"), report_for_run(run)
    assert (again.verdict, again.p_value) == (original.verdict, original.p_value) == ("confirmed", 1 / 8)

    other = tmp_path / "other.toml"
    other.write_text(BLOCKS_DESIGN.replace('name = "spec-tokens"', 'name = "other"', 1))
    with pytest.raises(ResultsError, match=r"exported\.csv:4: design-sha256 .* is not the design's"):
        read_results_csv(csv_path, load_design(other))

    campaign = tmp_path / "campaign.toml"
    campaign.write_text(
        'version = 1\nname = "c"\n\n[[parts]]\nname = "p"\nprofile = "embedded-cpu"\nknobs = {}\n'
        'state = "passed"\ndesign = "design.toml"\n\n[[parts.evidence]]\nstate = "passed"\n'
        'results = "exported.csv"\n'
    )
    c = load_campaign(campaign)
    ev = check_evidence(c, c.parts[0], c.parts[0].evidence[0])
    assert ev["ok"] and ev["decision"] == "confirmed" and ev["results_run_id"] == run.run_id


def test_the_exported_csv_carries_what_the_prompt_guard_compares_and_a_forged_one_fails(tmp_path: Path) -> None:
    """A balanced run's CSV has, per start, its failed requests and one digest of its requests' prompt-ID
    hashes: analyzing the file checks both guards as the run did (pass), gives the ratio of the means, and a
    CSV whose one start had other prompt IDs fails the guard (not confirmed); a blanked digest is unchecked,
    never pass; a digest that is not a sha256 is refused with its line."""
    from frank.console.cli import main
    from frank.experiments.analysis import analyze
    from frank.experiments.design import load_design
    from frank.experiments.errors import ResultsError
    from frank.experiments.results_csv import prompt_ids_digest, read_results_csv

    run = _register(tmp_path, BALANCED_DESIGN + "no_failed_requests = true\n")
    assert run_experiment(run, FakeCellExecutor()).reason == "finished"
    csv_path = tmp_path / "exported.csv"
    assert main(["experiment", "report", run.run_id, "--csv", str(csv_path)]) == 0
    lines = csv_path.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("start_order"))
    assert lines[header] == "start_order,block,arm,value,failed_requests,prompt_ids_sha256,seal"
    digest = prompt_ids_digest({"d1/r1": "h1", "d1/r2": "h2"})
    assert all(re.search(f",0,{digest},[0-9a-f]{{16}}$", line) for line in lines[header + 1 :])
    design = load_design(tmp_path / "design.toml")

    def analyzed(text: str) -> dict:
        path = tmp_path / "edited.csv"
        path.write_text(text)
        return analyze(design, read_results_csv(path, design), source="external")

    report = analyzed("\n".join(lines) + "\n")
    guards = {g.name: g.status for g in report.guards}
    assert guards == {"no_failed_requests": "pass", "prompt_token_ids_identical": "pass"}
    assert report.verdict == "confirmed" and report.p_fraction == "1/20"
    means = report.comparison.arm_means
    assert report.comparison.ratio_of_means == pytest.approx(means["off"] / means["on"])

    other = prompt_ids_digest({"d1/r1": "h1", "d1/r2": "other"})
    forged = list(lines)
    forged[header + 3] = forged[header + 3].replace(digest, other)
    with pytest.raises(ResultsError, match=rf"edited\.csv:{header + 4}: value: this row's values are not the ones"):
        analyzed("\n".join(forged) + "\n")  # the exported rows are sealed (docs/files.md)
    # the same values as measures taken elsewhere (no provenance, no seal): the guards decide from the file
    lines = [line.rsplit(",", 1)[0] for line in lines[header:]]
    header = 0
    forged = list(lines)
    forged[header + 3] = forged[header + 3].replace(digest, other)
    report = analyzed("\n".join(forged) + "\n")
    assert {g.name: g.status for g in report.guards}["prompt_token_ids_identical"] == "fail"
    assert report.verdict == "not confirmed"

    blanked = list(lines)
    blanked[header + 2] = blanked[header + 2].removesuffix(digest)
    report = analyzed("\n".join(blanked) + "\n")
    assert {g.name: g.status for g in report.guards}["prompt_token_ids_identical"] == "unchecked"

    bad = list(lines)
    bad[header + 1] = bad[header + 1].replace(digest, "not-a-hash")
    (tmp_path / "bad.csv").write_text("\n".join(bad) + "\n")
    with pytest.raises(ResultsError, match=rf"bad\.csv:{header + 2}: prompt_ids_sha256: 'not-a-hash' is not a sha256"):
        read_results_csv(tmp_path / "bad.csv", design)
