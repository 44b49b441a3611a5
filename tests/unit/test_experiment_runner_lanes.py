"""The runner with cells side by side, one in flight a host (frank.experiments.runner.Lanes), with Ray and
the hosts' engines replaced by FakeLanes: a virtual clock, each cell ending after its ticks (real Ray
nodes and engines are covered by tests/integration/test_fleet.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from frank.experiments import registry
from frank.experiments.errors import RunError
from frank.experiments.journal import read_events
from frank.experiments.randomize import Slot, hosts_by_slot
from frank.experiments.report import report_for_run
from frank.experiments.runner import CellError, Flight, Lanes, run_experiment
from tests.unit.experiment_helpers import BLOCKS_DESIGN


@pytest.fixture(autouse=True)
def frank_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FRANK_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


class Killed(BaseException):
    """The runner's process dies here: nothing after it is journaled."""


class FakeLanes:
    """Stands in for Ray and the hosts' engines. A cell takes `ticks[slot]` (default 1) of a virtual clock;
    `wait` moves the clock to the earliest end. The treatment is lower in every block but `losing_block`;
    `fail` fails an attempt, `lost` takes a host out after its first failed cell, `kill_at` kills the
    runner at that call of `wait`."""

    def __init__(
        self,
        run: registry.Run,
        ticks: dict[int, int] | None = None,
        fail: dict[tuple[int, int], CellError] | None = None,
        losing_block: int | None = None,
        kill_at: int | None = None,
        lost: str | None = None,
    ) -> None:
        self.host_of = hosts_by_slot(run.design.hosts, run.slots)
        self.ticks, self.fail, self.losing_block = ticks or {}, fail or {}, losing_block
        self.kill_at, self.lost, self.gone = kill_at, lost, False
        self.now, self.waits = 0, 0
        self.ends: dict[tuple[int, int], int] = {}
        self.sent: list[tuple[Any, dict[str, Any]]] = []
        self.calls: list[tuple[int, int]] = []
        self.cleanups: list[tuple[int, int]] = []
        self.cancelled: list[tuple[int, int]] = []

    def precheck(self, run: Any) -> None:
        pass

    def cleanup(self, run: Any, attempt: Any) -> str:
        self.cleanups.append((attempt.slot, attempt.attempt))
        return "stopped the cut-off cell's engine"

    def lane(self, slot: Slot) -> str:
        return self.host_of[slot.slot]

    def place(self, run: Any, slot: Slot) -> dict[str, Any]:
        if self.gone and self.lane(slot) == self.lost:
            raise RunError(f"host {self.lost} is not in the Ray cluster")
        return {"host": self.lane(slot)}

    def start(self, run: Any, slot: Slot, attempt: int) -> tuple[int, int]:
        self.calls.append((slot.slot, attempt))
        self.ends[(slot.slot, attempt)] = self.now + self.ticks.get(slot.slot, 1)
        self.sent.append(("engine_ready", {"slot": slot.slot, "attempt": attempt, "host": self.lane(slot)}))
        return (slot.slot, attempt)

    def value(self, slot: Slot) -> float:
        if slot.arm != "spec-2":
            return 1.5
        return 2.0 if slot.block == self.losing_block else 1.0 + 0.01 * (slot.block or 0)

    def wait(self, run: Any, flights: list[Flight], note: Any) -> list[tuple[Flight, Any]]:
        self.waits += 1
        for event, fields in self.sent:
            note(event, **fields)
        self.sent.clear()
        if self.waits == self.kill_at:
            raise Killed()
        self.now = min(self.ends[f.handle] for f in flights)
        ended: list[tuple[Flight, Any]] = []
        for f in flights:
            if self.ends[f.handle] == self.now:
                note("engine_stopped", slot=f.slot.slot, attempt=f.attempt, host=f.lane)
                failed = self.fail.get(f.handle)
                self.gone = self.gone or (failed is not None and f.lane == self.lost)
                ended.append((f, failed or {"value": self.value(f.slot), "failed": 0, "requests": 2}))
        return ended

    def cancel(self, run: Any, flights: list[Flight], note: Any) -> None:
        self.cancelled += [f.handle for f in flights]
        for f in flights:
            note("engine_stopped", slot=f.slot.slot, attempt=f.attempt, host=f.lane)


def _register(tmp_path: Path, blocks: int = 4, stop: bool = False) -> registry.Run:
    path = tmp_path / "design.toml"
    more = '\nhosts = ["a", "b"]' + ("\nstop_when_decided = true" if stop else "")
    path.write_text(BLOCKS_DESIGN.replace("blocks = 3", f"blocks = {blocks}{more}"))
    return registry.register(path, seed=7)


def _slots_of_block(run: registry.Run, block: int) -> list[int]:
    return [s.slot for s in run.slots if s.block == block]


def test_fake_lanes_is_what_the_runner_takes_for_lanes(tmp_path: Path) -> None:
    assert isinstance(FakeLanes(_register(tmp_path)), Lanes)


def test_two_hosts_run_a_cell_each_at_once_and_the_report_decides_as_on_one(tmp_path: Path) -> None:
    run = _register(tmp_path)
    fake = FakeLanes(run)
    result = run_experiment(run, fake)
    assert result.reason == "finished" and result.cells_run == 8
    events = read_events(run.journal_path)
    kinds = [(e["event"], e.get("host")) for e in events if e["event"] in ("cell_started", "cell_done")]
    assert kinds[:2] == [("cell_started", "a"), ("cell_started", "b")], "both hosts start before either ends"
    for e in events:  # a block's cells on its dealt host, in drawn order
        if e["event"] == "cell_started":
            assert e["host"] == "ab"[(e["block"] - 1) % 2]
    order = [e["slot"] for e in events if e["event"] == "cell_started" and e["host"] == "a"]
    assert order == sorted(order), "each host's cells in drawn order"
    report = report_for_run(run)
    assert report["decision"] == "confirmed" and report["p_fraction"] == "1/16"
    assert [b["host"] for b in report["blocks"]] == ["a", "b", "a", "b"]


def test_a_runner_killed_with_a_cell_in_flight_on_each_host_redoes_both(tmp_path: Path) -> None:
    run = _register(tmp_path)
    with pytest.raises(Killed):
        run_experiment(run, FakeLanes(run, kill_at=2))  # the first cell of each host done, the second in flight
    before = run.journal_path.read_bytes()
    events = read_events(run.journal_path)
    done = {e["slot"]: e["value"] for e in events if e["event"] == "cell_done"}
    in_flight = {(e["slot"], e["attempt"]) for e in events if e["event"] == "cell_started"} - {(s, 1) for s in done}
    assert len(done) == 2 and len(in_flight) == 2
    again = FakeLanes(run)
    assert run_experiment(run, again).reason == "finished"
    assert run.journal_path.read_bytes().startswith(before), "nothing recorded is lost or rewritten"
    assert sorted(again.cleanups) == sorted(in_flight), "each host's cut-off engine is stopped"
    events = read_events(run.journal_path)
    cut = [e for e in events if e["event"] == "cell_interrupted"]
    assert sorted((e["slot"], e["attempt"]) for e in cut) == sorted(in_flight) and all(e["host"] for e in cut)
    assert sorted(again.calls[:2]) == sorted((s, a + 1) for s, a in in_flight), "both redone first, side by side"
    assert not {s for s, _ in again.calls} & set(done), "done cells are not redone"
    assert {e["slot"]: e["value"] for e in events if e["event"] == "cell_done"}.items() >= done.items()
    assert report_for_run(run)["decision"] == "confirmed"


def test_once_decided_the_cell_in_flight_on_the_other_host_is_cancelled_and_not_counted(tmp_path: Path) -> None:
    run = _register(tmp_path, blocks=8, stop=True)
    slow = {s: 3 for s in _slots_of_block(run, 2)}  # host b's block 2 is slow: block 1 (a) is decided first
    fake = FakeLanes(run, ticks=slow, losing_block=1)
    result = run_experiment(run, fake)
    assert result.reason == "finished" and "after block 1 of 8" in result.message
    events = read_events(run.journal_path)
    decided = next(i for i, e in enumerate(events) if e["event"] == "decided")
    assert not any(e["event"] == "cell_started" for e in events[decided:]), "no cell starts once decided"
    first_of_b = _slots_of_block(run, 2)[0]
    assert fake.cancelled == [(first_of_b, 1)]
    cancelled = [e for e in events[decided:] if e["event"] == "cell_interrupted"]
    assert [(e["slot"], e["host"]) for e in cancelled] == [(first_of_b, "b")]
    assert "cancelled: the design was decided" in cancelled[0]["reason"]
    report = report_for_run(run)
    assert report["decision"] == "not confirmed" and report["stopped_when_decided"]["after"] == 1
    assert report["complete_blocks"] == 1, "the cancelled cell counts for nothing"
    assert run_experiment(run, FakeLanes(run)).cells_run == 0, "a second runner runs nothing"


def test_a_host_lost_stops_new_cells_and_the_other_host_finishes_its_own(tmp_path: Path) -> None:
    run = _register(tmp_path)
    b_first = _slots_of_block(run, 2)[0]
    a_first = _slots_of_block(run, 1)[0]
    fake = FakeLanes(run, ticks={a_first: 2}, fail={(b_first, 1): CellError("host b was lost mid-cell")}, lost="b")
    with pytest.raises(RunError, match="host b is not in the Ray cluster"):
        run_experiment(run, fake)
    events = read_events(run.journal_path)
    closing = [(e["event"], e["host"]) for e in events if e["event"] in ("cell_failed", "cell_done")]
    assert closing == [("cell_failed", "b"), ("cell_done", "a")], "a's cell in flight is finished and kept"
    assert events[-1]["event"] == "runner_stopped" and events[-1]["reason"] == "error"
    assert fake.calls == [(a_first, 1), (b_first, 1)] and fake.cancelled == []
    back = FakeLanes(run)  # the host is back: the run resumes, b's slot at its second attempt
    assert run_experiment(run, back).reason == "finished" and (b_first, 2) in back.calls
    assert report_for_run(run)["decision"] == "confirmed"
