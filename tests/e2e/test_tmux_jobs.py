"""End to end, in tmux, on the shared engine: a replay launched from the console's Replays menu outlives the
console. Kill the tmux session mid-draw (the console gets SIGHUP), start a new console in a new session: it
shows the replay still running and follows it to 90 of 90 requests ok (two draws: the kill lands in the
first, the new console follows the second), none recorded twice. Then cancel a
replay from the console (it asks first) and `frank replay --resume RUN` completes it with nothing lost.
Each test runs its own tmux server (tests/e2e/tmux.py)."""

from __future__ import annotations

import collections
import json
import time
from pathlib import Path

import psutil
import pytest

from frank import jobs
from tests.e2e.tmux import TMUX, Console, kill_server, new_socket

pytestmark = [pytest.mark.e2e, pytest.mark.engine, pytest.mark.usefixtures("job_kinds")]

REPO = Path(__file__).resolve().parents[2]


def running_replay(timeout_s: float, done_at_least: int = 1) -> jobs.JobStatus:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [j for j in jobs.list_jobs(running_only=True) if j.kind == "replay" and j.done >= done_at_least]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no replay job with {done_at_least} records running after {timeout_s} s")


def wait_ended(run_id: str, timeout_s: float) -> jobs.JobStatus:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        st = jobs.status(run_id)
        if st.state != "running":
            return st
        time.sleep(0.2)
    raise AssertionError(f"{run_id} still running after {timeout_s} s")


def records(run_dir: str) -> collections.Counter:
    seen: collections.Counter = collections.Counter()
    for path in Path(run_dir).glob("draw-*.jsonl"):
        for line in path.read_bytes().splitlines():
            rec = json.loads(line)
            seen[(rec["draw"], rec["id"], rec["status"])] += 1
    return seen


@pytest.fixture
def tmux_socket():
    socket = new_socket()
    yield socket
    kill_server(socket)


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_replay_outlives_a_killed_console_and_a_new_one_follows_it(engine, tmux_socket):
    first = Console(tmux_socket, width=140, height=40)
    try:
        first.wait_for("● ready", 60)  # adopts the shared engine
        first.keys("2")
        first.wait_for("w01-mini", 20)
        first.keys("Tab", "BSpace", "BSpace", "BSpace", *"draw-1,draw-2")  # draws: two of W01 mini's three
        first.pick_front_end_mode()
        first.keys("BTab", "Enter")  # launch: 2 × 45 requests
        job = running_replay(120, done_at_least=3)  # in the middle of draw-1
        console_proc = psutil.Process(first.pid)
        first.close()  # the terminal goes away: SIGHUP
        psutil.wait_procs([console_proc], timeout=10)
        assert not console_proc.is_running()
        assert jobs.status(job.run_id).state == "running"  # the replay did not notice

        second = Console(tmux_socket, width=140, height=40)
        try:
            second.wait_for("● ready", 60)
            second.keys("2")
            text = second.wait_for(job.run_id, 20)  # listed with the running jobs and followed
            assert "running" in text
            second.wait_for("● running", 20)
            second.wait_for("● finished", 300)
            second.wait_for("draw-2 45/45 ok · 0 failed", 30)  # once the toast saying it finished is gone
        finally:
            second.close()
    finally:
        first.close()
    final = jobs.status(job.run_id)
    assert (final.state, final.done, final.planned) == ("finished", 90, 90), final
    seen = records(final.run_dir)
    assert len(seen) == 90 and set(seen.values()) == {1}  # 90 ok, none recorded twice
    assert {draw for draw, _, _ in seen} == {"draw-1", "draw-2"}
    assert all(status == "ok" for _, _, status in seen)


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_cancel_from_the_console_then_resume_completes_it(frank_cli, engine, tmux_socket):
    console = Console(tmux_socket, width=140, height=40)
    try:
        console.wait_for("● ready", 60)
        console.keys("2")
        console.wait_for("w01-mini", 20)
        console.keys("Tab", "BSpace", "BSpace", "BSpace", *"draw-2")  # draws: draw-2
        console.pick_front_end_mode()
        console.keys("BTab", "Enter")
        job = running_replay(120, done_at_least=2)
        console.wait_for("● running", 20)
        console.keys("C")  # cancel asks first
        console.wait_for("Cancel the job?", 10)
        assert jobs.status(job.run_id).state == "running"
        console.keys("y")
        st = wait_ended(job.run_id, 60)
        assert st.state == "cancelled", st
        console.wait_for("● cancelled", 20)
        kept = records(st.run_dir)
        assert 2 <= len(kept) < 45
    finally:
        console.close()
    result = frank_cli("replay", "--resume", job.run_id, "--quiet", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["totals"]["ok"] == 45
    seen = records(st.run_dir)
    assert len(seen) == 45 and set(seen.values()) == {1} and set(kept) <= set(seen)
