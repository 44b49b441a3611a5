"""The real cell executor's pure parts: measures from replay records, and leaving no engine behind when a
stop request arrives mid-start (the controller is replaced by a recorder for that fault only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from frank.experiments import registry
from frank.experiments.cell import EngineCellExecutor
from frank.experiments.runner import RunnerInterrupted, run_experiment
from frank.workloads.record import draw_totals, start_measures, tallies_of
from tests.unit.experiment_helpers import BLOCKS_DESIGN


def measures_of(records: dict[str, list[dict[str, Any]]], warmup: int) -> dict[str, Any]:
    return start_measures(tallies_of(records, warmup)).to_json()


def rec(
    i: int,
    *,
    ok: bool = True,
    attributed: bool = True,
    front: float = 0.1,
    decode: float = 0.5,
    steps: float = 10,
    total: float = 1.0,
    tokens: int = 20,
    h: str = "h",
) -> dict[str, Any]:
    # ngram drafting: one decode step in ten found no draft (spec_decode_num_drafts counts 9 of 10)
    return {
        "id": f"r{i}",
        "index": i,
        "status": "ok" if ok else "failed",
        "prompt_ids_sha256": h,
        "client": {"total_s": total},
        "completion_tokens": tokens,
        "server": {
            "attributed": attributed,
            "front_end_s": front,
            "decode_s": decode,
            "decode_steps": steps,
            "verify_steps": steps - steps // 10,
            "accepted_tokens": steps,
        },
    }


def test_measures_by_hand() -> None:
    records = {
        "1": [
            rec(0, front=9.0, decode=9.0, steps=1),
            rec(1, front=0.2, decode=0.4, steps=8, total=2.0, tokens=30),
            rec(2, front=0.3, decode=0.6, steps=12, total=1.0, tokens=10),
        ],
        "2": [rec(0, front=9.0), rec(1, front=0.1, decode=0.0, steps=0, total=1.0, tokens=0), rec(2, ok=False)],
    }
    m = measures_of(records, warmup=1)  # index 0 of each draw is warm-up
    assert m["time_per_verify_step"] == pytest.approx((0.4 + 0.6) / (8 + 12))
    assert m["front_end_by_draw"] == pytest.approx({"1": 0.5, "2": 0.1})
    assert m["front_end_per_draw"] == pytest.approx(0.3)
    assert m["total_replay_time"] == pytest.approx(4.0)
    assert m["tokens_per_s"] == pytest.approx(40 / 4.0)
    assert m["failed"] == 1 and m["measured_requests"] == 3 and m["unattributed"] == 0
    assert m["cpu_expert_wait_per_step"] is None  # no record carries a CPU-expert wait (not llama.cpp's)
    assert set(m["prompt_hashes"]) == {"1/r0", "1/r1", "1/r2", "2/r0", "2/r1", "2/r2"}


def test_the_cell_and_the_replay_runner_give_the_same_time_per_verify_step() -> None:
    records = [
        rec(0, decode=0.4, steps=8),
        rec(1, decode=0.6, steps=12),
        rec(2, decode=0.0, steps=0),
        rec(3, attributed=False, decode=5.0, steps=1),
    ]
    cell = measures_of({"1": records}, warmup=0)["time_per_verify_step"]
    runner = draw_totals("1", [r["id"] for r in records], records).verify_step_s
    assert cell == runner == pytest.approx(1.0 / 20)  # decode steps, not drafts (19): 1.0 / 19 differs


def test_latest_record_wins_and_unattributed_is_counted() -> None:
    records = {"1": [rec(0, ok=False), rec(0, front=0.4), rec(1, attributed=False)]}
    m = measures_of(records, warmup=0)
    assert m["failed"] == 0 and m["front_end_per_draw"] == pytest.approx(0.4) and m["unattributed"] == 1


def test_a_value_some_request_lacks_is_absent_never_zero() -> None:
    """llama.cpp exports no queue time, so no front-end time: the draw's and the start's sums are None."""
    records = [rec(0, front=0.4), rec(1, front=0.2)]
    records[1]["server"]["front_end_s"] = None
    t = draw_totals("1", ["r0", "r1"], records)
    assert t.front_end_s is None and t.decode_s == pytest.approx(1.0)
    assert measures_of({"1": records}, warmup=0)["front_end_per_draw"] is None
    assert draw_totals("1", ["r0"], records[:1]).front_end_s == pytest.approx(0.4)


def test_a_tally_folds_one_record_at_a_time_as_a_fold_of_all() -> None:
    """The replay runner adds each record as it is written; a request replayed again replaces its record."""
    from frank.workloads.record import DrawTally

    records = [rec(0, front=0.3), rec(1, ok=False), rec(2, decode=0.2, steps=4), rec(1, front=0.5)]
    tally = DrawTally("1", ["r0", "r1", "r2"])
    for r in records:
        tally.add(r)
    assert tally.totals() == draw_totals("1", ["r0", "r1", "r2"], records)
    assert tally.totals().ok == 3 and tally.totals().failed == 0
    assert tally.totals().front_end_s == pytest.approx(0.3 + 0.1 + 0.5)


class InterruptedWhileStartingController:
    """Stands in for EngineController for one fault a real engine cannot give on demand: a stop request
    arriving while the engine is starting."""

    def __init__(self) -> None:
        self.stops = 0
        self.running = False

    def status(self, check_health: bool = True) -> Any:
        return type(
            "S", (), {"state": "starting" if self.running else "stopped", "pid": 1, "profile": "x", "started_at": None}
        )()

    def start(self, profile: str, knobs: dict[str, Any]) -> Any:
        self.running = True
        raise RunnerInterrupted("stopped by SIGTERM")

    def stop(self) -> None:
        self.stops += 1
        self.running = False


def test_stop_request_during_engine_start_leaves_no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FRANK_HOME", str(tmp_path / "home"))
    workload = tmp_path / "tiny"
    from frank.workloads.format import write_workload

    write_workload(
        workload,
        "tiny",
        "",
        [
            (
                "1",
                [
                    {
                        "id": "r1",
                        "task": "t",
                        "episode": "e",
                        "turn": 1,
                        "offset_s": 0.0,
                        "body": {"messages": [{"role": "user", "content": "hi"}]},
                    }
                ],
            )
        ],
    )
    design = tmp_path / "d.toml"
    design.write_text(BLOCKS_DESIGN.replace('name = "tiny"', f'name = "{workload}"'))
    run = registry.register(design, seed=1)
    controller = InterruptedWhileStartingController()
    result = run_experiment(run, EngineCellExecutor(controller))  # type: ignore[arg-type]
    assert result.reason == "interrupted"
    assert controller.stops == 1 and not controller.running


def test_registration_refuses_a_draw_the_workload_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FRANK_HOME", str(tmp_path / "home"))
    from frank.workloads.format import write_workload

    write_workload(
        tmp_path / "tiny",
        "tiny",
        "",
        [
            (
                "draw-1",
                [
                    {
                        "id": "r1",
                        "task": "t",
                        "episode": "e",
                        "turn": 1,
                        "offset_s": 0.0,
                        "body": {"messages": [{"role": "user", "content": "hi"}]},
                    }
                ],
            )
        ],
    )
    design = tmp_path / "d.toml"
    design.write_text(BLOCKS_DESIGN.replace('name = "tiny"', 'name = "tiny"\ndraws = ["1"]'))
    with pytest.raises(
        registry.RunError, match=r"d\.toml: workload\.draws\[0\]: .* no draw named '1' \(draws: draw-1\)"
    ):
        registry.register(design, seed=1)
    design.write_text(BLOCKS_DESIGN.replace('name = "tiny"', 'name = "tiny"\ndraws = ["draw-1"]'))
    run = registry.register(design, seed=1)  # relative to the design file's folder
    assert run.meta["workload"]["path"] == str((tmp_path / "tiny").resolve())


def test_the_cpu_expert_wait_is_a_measure_of_the_start() -> None:
    records = {"1": [rec(0, decode=0.4, steps=8), rec(1, decode=0.6, steps=12), rec(2, decode=0.2, steps=4)]}
    records["1"][0]["server"]["cpu_expert_wait_s"] = 0.08  # warm-up: left out
    records["1"][1]["server"]["cpu_expert_wait_s"] = 0.12
    records["1"][2]["server"]["cpu_expert_wait_s"] = 0.04
    m = measures_of(records, warmup=1)
    assert m["cpu_expert_wait_per_step"] == pytest.approx((0.12 + 0.04) / (12 + 4))


def test_a_failed_requests_own_message_is_kept_from_its_latest_record(tmp_path: Path) -> None:
    """The engine's words for a failed request (llama.cpp's tool-call parser refusing a random model's
    output, say) go into the cell's outcome, from each request's latest record: a retried success wins."""
    import json

    from frank.experiments.cell import failure_messages

    lines = [
        {
            "id": "d1-r1",
            "status": "failed",
            "http_status": 500,
            "error": "does not match the expected peg-native format",
        },
        {"id": "d1-r2", "status": "failed", "error": "timeout"},
        {"id": "d1-r2", "status": "ok"},
    ]
    (tmp_path / "draw-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))

    class Replay:
        draw_names = ("draw-1",)

        def draw_file(self, draw: str) -> Path:
            return tmp_path / f"{draw}.jsonl"

    assert failure_messages(Replay()) == ["d1-r1: HTTP 500: does not match the expected peg-native format"]  # type: ignore[arg-type]
