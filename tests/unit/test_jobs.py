"""frank.jobs without an engine: the state a run reads as (lock held, clean end, process gone), a stale
end from an earlier attempt, and the follower reading only whole new records."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from frank import jobs, paths
from frank.workloads.replay import SUMMARY_FILE, default_runs_root

REPO = Path(__file__).resolve().parents[2]
HOLD_LOCK = (
    "import sys, time; from pathlib import Path; from frank.jobs import RunLock; "
    "RunLock(Path(sys.argv[1])).acquire(); print('locked', flush=True); time.sleep(60)"
)


@pytest.fixture
def run_dir(fresh_frank_home) -> Path:
    folder = paths.private_dir(default_runs_root() / "20261130-120000-w01-mini-engine-abcd")
    jobs.write_job_file(folder, "replay", None, planned=3)
    return folder


def summary(folder: Path, state: str, at: float, done: int = 2) -> None:
    draws = {"draw-1": {"requests": done, "planned": 3, "ok": done, "failed": 0}}
    paths.write_private(
        folder / SUMMARY_FILE,
        json.dumps({"state": state, "updated_at": at, "draws": draws, "totals": {"ok": done, "failed": 0}}),
    )


def test_a_live_lock_holder_is_running_and_kill_9_reads_as_interrupted(run_dir):
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(run_dir / "job.lock")], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "locked"
        summary(run_dir, "running", time.time())
        st = jobs.status(run_dir.name)
        assert (st.state, st.pid, st.kind, st.done, st.planned) == ("running", child.pid, "replay", 2, 3)
        with pytest.raises(jobs.JobError, match="another process"):
            jobs.RunLock(run_dir / "job.lock").acquire()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        assert jobs.status(run_dir.name).state == "interrupted"
        assert [j.run_id for j in jobs.list_jobs(running_only=True)] == []
    finally:
        child.kill()
        child.wait()


def test_a_clean_end_counts_only_when_newer_than_the_latest_start(run_dir):
    summary(run_dir, "stopped", time.time() + 5)
    assert jobs.status(run_dir.name).state == "cancelled"
    summary(run_dir, "finished", time.time() + 5, done=3)
    assert (jobs.status(run_dir.name).state, jobs.status(run_dir.name).done) == ("finished", 3)
    summary(run_dir, "stopped", time.time() - 60)  # the end of an earlier attempt, then a kill -9
    assert jobs.status(run_dir.name).state == "interrupted"


def test_an_unknown_run_is_a_clear_error(fresh_frank_home):
    with pytest.raises(jobs.JobError, match="no run 'nope'"):
        jobs.status("nope")


def test_follower_reads_only_whole_new_records(run_dir):
    follower = jobs.Follower(run_dir.name)
    path = run_dir / "draw-1.jsonl"
    path.write_bytes(b'{"id": "a", "draw": "draw-1"}\n{"id": "b", "dr')
    assert [r["id"] for r in follower.poll()[1]] == ["a"]
    assert follower.poll()[1] == []
    with open(path, "ab") as handle:
        handle.write(b'aw": "draw-1"}\n{"id": "c", "draw": "draw-1"}\n')
    assert [r["id"] for r in follower.poll()[1]] == ["b", "c"]
