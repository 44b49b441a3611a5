"""The noise study on the real embedded engine, kept short: a registered A/A run of 2 blocks whose cells are the
real cell executor (replay, measures, the rig recorder beside the engine) with one change, that every cell
reuses the session's shared engine instead of starting its own (a start costs a minute here; a real study
starts one per cell: `frank experiment noise DESIGN`, docs/experiments.md). The report then splits real
streamed step times, request values and start values into the three levels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from frank.experiments import registry
from frank.experiments.cell import EngineCellExecutor
from frank.experiments.noise_report import format_noise, mark_study, noise_report
from frank.experiments.randomize import Slot
from frank.experiments.runner import run_experiment
from frank.paths import REPO_ROOT

pytestmark = pytest.mark.engine

DESIGN = f"""
name = "noise-shared-engine"
question = "Where does the spread of time per verify step come from on the shared engine?"
profile = "embedded-cpu"

[[arms]]
name = "a1"

[[arms]]
name = "a2"

[design]
kind = "blocks"
blocks = 2

[workload]
name = "{REPO_ROOT / "frank/experiments/designs/workloads/review-t0"}"
warmup_requests = 1

[measure]
name = "time_per_verify_step"

[rule]
test = "sign"
treatment = "a2"
control = "a1"
"""


class SharedEngineCells(EngineCellExecutor):
    """The real cell, on the engine that is already up: no start, no stop."""

    def precheck(self, run: registry.Run) -> None:
        self._workload(run)

    def _start(self, profile: str, knobs: dict[str, Any], slot: Slot, attempt: int, note: Any) -> Any:
        st = self.controller.status()
        note("engine_ready", slot=slot.slot, attempt=attempt, pid=st.pid, url=st.url, ready_s=0.0, reused=True)
        return st

    def _stop_engine(self) -> None:
        pass


@pytest.mark.timeout(600)
def test_a_noise_study_of_real_replays_names_the_three_levels(engine, tmp_path: Path, frank_cli) -> None:
    path = tmp_path / "noise.toml"
    path.write_text(DESIGN)
    run = registry.register(path, seed=49)
    mark_study(run, 3.0)
    result = run_experiment(run, SharedEngineCells(engine))
    assert result.reason == "finished", result.message
    report = noise_report(run)
    d = report.decomposition
    assert d is not None and (d.starts, d.settings, d.requests) == (4, 1, 3), report.decomposition_note
    for name in ("request", "start"):
        assert d.level(name).variance is not None and d.level(name).df > 0
    step = d.level("step")  # the client tells steps apart where the API server streamed one event a step
    assert step.variance is not None or "could not tell steps apart" in step.note
    assert abs(sum(v or 0 for v in d.shares_of_cell().values()) - 1) < 1e-9
    assert [(r.aggregate, r.dropped, r.requests) for r in report.shrink if r.design] == [("mean", 1, 3)]
    pid = engine.status().pid
    for s in report.starts:  # the recorder read the engine's own process tree beside every replay
        cond = s["rig"]["conditions"]
        assert cond["samples"] >= 1 and s["conditions"]["engine_percent"] is not None, s
        assert s["rig"]["facts"]["host"]["logical_cores"] >= 1
    assert pid and all(s["value"] > 0 for s in report.starts)
    text = format_noise(report)
    assert all(words in text for words in ("step within a request", "request within a start", "start within"))
    out = frank_cli.json("experiment", "noise", "--report", run.run_id)
    assert out["decomposition"]["starts"] == 4 and set(out["decomposition"]["levels"]) == {"step", "request", "start"}
