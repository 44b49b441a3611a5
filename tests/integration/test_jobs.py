"""Detached jobs on the shared real engine: `frank replay --detach` returns at once and the job finishes on
its own; `frank jobs cancel` stops it cleanly and `--resume` completes it; kill -9 at random points reads as
interrupted and resume completes the run with no record lost or duplicated."""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from frank import jobs

pytestmark = [pytest.mark.engine, pytest.mark.usefixtures("job_kinds")]


def wait_state(run_id: str, done_at_least: int = 0, timeout_s: float = 240) -> jobs.JobStatus:
    """Poll until the run has `done_at_least` records while running, or has ended."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        st = jobs.status(run_id)
        if st.state != "running" or (done_at_least and st.done >= done_at_least):
            return st
        time.sleep(0.05)
    raise AssertionError(f"{run_id} still running after {timeout_s} s: {jobs.status(run_id)}")


def records_by_id(run_dir: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = collections.defaultdict(list)
    for path in sorted(Path(run_dir).glob("draw-*.jsonl")):
        for line in path.read_bytes().splitlines():
            rec = json.loads(line)
            out[f"{rec['draw']}/{rec['id']}"].append(rec)
    return out


def test_detach_returns_at_once_and_the_job_finishes(frank_cli, engine):
    started = time.monotonic()
    launched = frank_cli.json("replay", "w01-mini", "--draws", "draw-1", "--limit", "6", "--detach", ok=(0, 3))
    assert time.monotonic() - started < 20  # returns while the job runs (interpreter start included)
    assert launched["run_id"] and launched["pid"] and launched["kind"] == "replay"
    st = wait_state(launched["run_id"])
    status = frank_cli.json("jobs", "status", launched["run_id"], ok=(0, 3))
    assert (st.state, status["state"], status["done"], status["planned"], status["pid"]) == (
        "finished",
        "finished",
        6,
        6,
        None,
    )
    listed = frank_cli.json("jobs", "list", ok=(0, 3))["jobs"]
    assert launched["run_id"] in [j["run_id"] for j in listed]


def sigterm_pending(pid: int) -> bool:
    """SIGTERM waits in the process's (or a thread's) pending set: /proc/PID/status, ShdPnd or SigPnd."""
    masks = [line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines() if "Pnd:" in line]
    return any(int(mask, 16) & (1 << (signal.SIGTERM - 1)) for mask in masks)


def test_cancel_then_resume_loses_nothing(frank_cli, engine):
    # The job is held (SIGSTOP) from its second record until `frank jobs cancel` has sent its SIGTERM: on a
    # loaded machine a whole draw of 45 could finish while the CLI's interpreter was still starting (seen
    # twice). Held, it cannot: 8 requests leave work to cancel.
    launched = frank_cli.json("replay", "w01-mini", "--draws", "draw-2", "--limit", "8", "--detach", ok=(0, 3))
    run_id, pid = launched["run_id"], launched["pid"]
    wait_state(run_id, done_at_least=2)
    os.kill(pid, signal.SIGSTOP)
    try:
        cancel = frank_cli.popen("jobs", "cancel", run_id, "--wait", "120", "--json")
        deadline = time.monotonic() + 120
        while not sigterm_pending(pid) and cancel.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        os.kill(pid, signal.SIGCONT)
    out, _ = cancel.communicate(timeout=180)
    assert cancel.returncode == 0, out
    cancelled = json.loads(out)
    assert cancelled["state"] == "cancelled", cancelled
    before = records_by_id(cancelled["run_dir"])
    assert 2 <= len(before) < 8
    summary = frank_cli.json("replay", "--resume", run_id, "--quiet", ok=(0, 3))
    assert summary["state"] == "finished" and summary["totals"]["ok"] == 8
    after = records_by_id(cancelled["run_dir"])
    assert len(after) == 8 and all(len(recs) == 1 for recs in after.values())  # nothing lost, none twice
    assert all(after[key] == recs for key, recs in before.items())  # earlier records untouched


def test_kill_9_at_random_points_then_resume(frank_cli, engine):
    rng = random.Random(int(os.environ.get("FRANK_TEST_SEED", time.time())))
    # The whole draw (45 requests, tens of ms each once cached): kill points in the first 30 leave work
    # in flight. A kill that lands after the job finished by itself interrupts nothing; at least one must land.
    launched = frank_cli.json("replay", "w01-mini", "--draws", "draw-3", "--detach", ok=(0, 3))
    run_id, run_dir = launched["run_id"], launched["run_dir"]
    pid = launched["pid"]
    landed = 0
    for kill in range(3):
        at = rng.randint(1, 10) + 10 * kill  # (0 would mean "wait for the end" to wait_state)
        st = wait_state(run_id, done_at_least=at)
        if st.state != "running":
            break
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while jobs.status(run_id).state == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        st = jobs.status(run_id)
        if st.state == "finished":  # it had ended on its own just before the kill
            assert st.done == st.planned == 45, st
            break
        assert st.state == "interrupted", st
        assert frank_cli.json("jobs", "status", run_id, ok=(0, 3))["state"] == "interrupted"
        landed += 1
        pid = frank_cli.json("replay", "--resume", run_id, "--detach", ok=(0, 3))["pid"]
    assert landed >= 1
    final = wait_state(run_id)
    assert final.state == "finished", final
    recs = records_by_id(run_dir)
    assert sorted(recs) == sorted(f"draw-3/{rid}" for rid in planned_ids("draw-3", 45))  # none lost
    assert all(len(v) == 1 and v[0]["status"] == "ok" for v in recs.values())  # none twice


def planned_ids(draw: str, limit: int) -> list[str]:
    from frank.workloads.catalog import resolve_workload
    from frank.workloads.format import load_workload

    return [r.id for r in load_workload(resolve_workload("w01-mini"), [draw]).requests[draw][:limit]]
