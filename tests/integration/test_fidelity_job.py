"""Fidelity as a job kind, over the shared real engine: a foreground `frank fidelity run` is listed by
`frank jobs list` as a finished fidelity job whose folder holds the saved run; a detached one is listed
running while it measures and `frank jobs cancel` stops it, saving nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.integration.test_fidelity_engine import frank, run_json, small_set

pytestmark = pytest.mark.engine


def listed(run_id: str) -> dict | None:
    return next((j for j in run_json("jobs", "list")["jobs"] if j["run_id"] == run_id), None)


def test_fidelity_runs_are_jobs_listed_and_cancellable(engine, tmp_path: Path) -> None:
    run = run_json("fidelity", "run", "--sets", str(small_set(tmp_path / "small")))
    job = listed(run["id"])
    assert job is not None and job["kind"] == "fidelity" and job["state"] == "finished", job
    assert Path(job["run_dir"], "run.json").is_file() and job["done"] == 1

    started = run_json("fidelity", "run", "--detach")  # the three shipped sets: long enough to cancel
    run_id = started["run_id"]
    job = listed(run_id)
    assert job is not None and job["kind"] == "fidelity" and job["state"] == "running" and job["pid"], job
    time.sleep(2.0)  # let it get into the measurement
    cancelled = run_json("jobs", "cancel", run_id, "--wait", "60")
    assert cancelled["state"] == "cancelled", cancelled
    assert not Path(cancelled["run_dir"], "run.json").exists()  # a cancelled measurement saves nothing
    assert run_id not in [r["id"] for r in run_json("fidelity", "list")["runs"]]
    again = frank("jobs", "cancel", run_id)
    assert again.returncode != 0 and "not running" in again.stderr
    log = json.loads(Path(cancelled["run_dir"], "job.json").read_text())
    assert log["kind"] == "fidelity"
