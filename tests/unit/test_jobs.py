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

pytestmark = pytest.mark.usefixtures("job_kinds")

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


def test_the_registry_holds_what_its_callers_give_and_refuses_a_second_module_under_a_name(job_kinds):
    assert [k.name for k in jobs.registered()] == ["replay", "experiment", "episodes", "fidelity"]
    replay = jobs.kind("replay")
    jobs.register(replay)  # idempotent
    assert jobs.registered().count(replay) == 1
    impostor = jobs.JobKind("replay", "somewhere.else", replay.root, replay.progress, replay.is_run)
    with pytest.raises(jobs.JobError, match="'replay' is already frank.workloads.replay_job, not somewhere.else"):
        jobs.register(impostor)
    with pytest.raises(jobs.JobError, match="no job kind 'nope' \\(kinds: replay, experiment, episodes, fidelity\\)"):
        jobs.kind("nope")


def test_a_job_process_finds_only_its_own_kinds_runs(run_dir):
    """`python -m KIND_MODULE RUN` reads its run through its own KIND (no registry in a job process): a run
    of another kind, or no run, is refused with the reason."""
    replay, fidelity = jobs.kind("replay"), jobs.kind("fidelity")
    assert jobs.main_run_dir([run_dir.name], replay) == run_dir
    assert jobs.main_run_dir([str(run_dir)], replay) == run_dir
    with pytest.raises(SystemExit, match=f"{run_dir} is a replay run, not a fidelity run"):
        jobs.main_run_dir([str(run_dir)], fidelity)
    with pytest.raises(SystemExit, match=f"no fidelity run '{run_dir.name}'"):
        jobs.main_run_dir([run_dir.name], fidelity)
    with pytest.raises(SystemExit, match="usage: python -m frank.fidelity.job RUN_ID"):
        jobs.main_run_dir([], fidelity)
