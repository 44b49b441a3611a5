"""Fidelity as a job kind, over the shared real engine: a foreground `frank fidelity run` is listed by
`frank jobs list` as a finished fidelity job whose folder holds the saved run; a detached one is listed
running while it measures and `frank jobs cancel` stops it, saving nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frank.fidelity.job import PROGRESS
from tests.integration.test_fidelity_engine import small_set
from tests.polling import wait_for

pytestmark = pytest.mark.engine


def listed(frank_cli, run_id: str) -> dict | None:
    return next((j for j in frank_cli.json("jobs", "list")["jobs"] if j["run_id"] == run_id), None)


def test_fidelity_runs_are_jobs_listed_and_cancellable(frank_cli, engine, tmp_path: Path) -> None:
    run = frank_cli.json("fidelity", "run", "--sets", str(small_set(tmp_path / "small")))
    job = listed(frank_cli, run["id"])
    assert job is not None and job["kind"] == "fidelity" and job["state"] == "finished", job
    assert Path(job["run_dir"], "run.json").is_file() and job["done"] == 1

    started = frank_cli.json("fidelity", "run", "--detach")  # the three shipped sets: long enough to cancel
    run_id = started["run_id"]
    job = listed(frank_cli, run_id)
    assert job is not None and job["kind"] == "fidelity" and job["state"] == "running" and job["pid"], job
    # cancelled inside the measurement: once it has reported its first step
    assert wait_for(lambda: Path(started["run_dir"], PROGRESS).is_file(), 120, step_s=0.1)
    cancelled = frank_cli.json("jobs", "cancel", run_id, "--wait", "60")
    assert cancelled["state"] == "cancelled", cancelled
    assert not Path(cancelled["run_dir"], "run.json").exists()  # a cancelled measurement saves nothing
    assert run_id not in [r["id"] for r in frank_cli.json("fidelity", "list")["runs"]]
    again = frank_cli("jobs", "cancel", run_id)
    assert again.returncode != 0 and "not running" in again.stderr
    log = json.loads(Path(cancelled["run_dir"], "job.json").read_text())
    assert log["kind"] == "fidelity"
