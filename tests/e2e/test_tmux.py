"""End to end: `frank` in a real terminal (tmux). Start the engine with a key, flip the region cache,
launch a short replay from the menu (its default mode decodes: the dashboard shows the verify step live),
read the results from the captured pane; then quit (the engine keeps running) and start the console
again: it adopts the engine. One real embedded engine (~1-2 min).

Then a real crash on that engine, which the console left running (one vLLM start fewer than an engine of its
own): a replay's server is SIGKILLed mid-request, and the run resumes on the shared engine."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from frank.engine.controller import EngineController, _group_members
from frank.workloads.replay import ReplayOptions, read_records, resume_replay, start_replay
from frank.workloads.w01 import make_w01
from tests.e2e.tmux import TMUX, Console, kill_server, new_socket
from tests.polling import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.engine]


@pytest.fixture(scope="module")
def console_home(tmp_path_factory: pytest.TempPathFactory):
    """The console's FRANK_HOME; whatever engine is left running there is stopped when the module ends."""
    home = tmp_path_factory.mktemp("console-home")
    yield home
    EngineController(state_dir=home / "state").stop()


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_console_in_tmux_starts_engine_flips_cache_and_replays(console_home: Path):
    controller = EngineController(state_dir=console_home / "state")
    socket = new_socket()
    pane = Console(socket, {"FRANK_HOME": str(console_home)})
    try:
        pane.wait_for("● stopped", 30)
        pane.keys("s")  # start the engine with a key
        # ready, and the start action finished (until then the panel says "starting…" and keys wait)
        text = pane.wait_for("● ready", 420, gone="starting…")
        assert "ready in" in text and "embedded-cpu" in text
        pid = controller.status().pid

        pane.keys("c")  # flip the region cache (live knob)
        pane.wait_for("region_cache = on (live)", 30)
        assert controller.status().knobs["region_cache"] == "on"
        assert controller.status().pid == pid  # live: no restart

        pane.keys("2")  # the replays menu
        pane.wait_for("w01-mini", 15)
        pane.keys("Tab", "BSpace", "BSpace", "BSpace", *"draw-1")  # draws: draw-1
        pane.keys("Tab", "3")  # limit: first 3 requests
        pane.keys("BTab", "BTab")  # back to the workloads table
        pane.keys("Enter")  # launch w01-mini in the menu's default mode: it decodes (verify steps)
        pane.wait_for("started (pid", 60)  # the launch's notification (a key pressed before it lands would
        # take the launch off its screen)
        pane.keys("1")  # what the console is for: the dashboard shows the verify step live, a number
        pane.wait_for_match(r"verify step +[0-9][0-9.]* (µs|ms|s)\b", 120)
        pane.keys("2")
        text = pane.wait_for("● finished", 300)
        assert "draw-1 3/3 ok" in text, text  # the draw totals, read from the pane
        assert "0 failed" in text

        pane.keys("q")  # quit: the engine keeps running
        deadline = time.monotonic() + 10
        while pane.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not pane.alive()
        assert controller.status().state == "ready" and controller.status().pid == pid

        pane = Console(socket, {"FRANK_HOME": str(console_home)})  # a new console adopts it
        pane.wait_for("● ready", 30)
        # the same engine and its live knob, once the pane has its whole layout: the first frames of a
        # console starting in a pane can show the state line before the rest (a CI run caught one)
        pane.wait_for(f"pid {pid}", 15)
        pane.wait_for("region_cache = on", 15)
    finally:  # the engine is left running for the crash test below (console_home stops it in the end)
        pane.close()
        kill_server(socket)


def test_engine_killed_during_a_request_then_resumed_on_another_engine(frank_cli, engine, console_home, tmp_path):
    """A real crash: the console's engine (the test above leaves it running; started here when run alone) has
    its server SIGKILLed while a replay's first request is prefilling. The controller reports `crashed` with
    the signal and the log tail, and the supervisor cleans up the rest of the group; the run records the
    failure and stops; resuming it against the shared engine finishes the draw."""
    mini = make_w01(tmp_path / "w01-mini", "mini", seed=1)
    own = EngineController(state_dir=console_home / "state")
    if own.status().state != "ready":
        own.stop()
        assert own.start("embedded-cpu").state == "ready"
    status = own.status()
    assert status.profile == "embedded-cpu" and status.pid is not None
    killed = threading.Event()

    def kill_soon(p):
        if p.phase == "request" and p.done == 0 and not killed.is_set():

            def kill():
                os.kill(status.pid, signal.SIGKILL)
                killed.set()

            threading.Timer(0.5, kill).start()

    try:
        runner = start_replay(
            mini, status.url, ReplayOptions(draws=("draw-1",), limit=2), out=tmp_path / "crash", progress=kill_soon
        )
        summary = runner.run_sync()
        assert killed.wait(10)
        assert wait_for(lambda: own.status().state == "crashed", 30)
        crashed = own.status()
        assert crashed.exit is not None and crashed.exit.signal == "SIGKILL" and crashed.log_tail
        # the supervisor cleaned up the rest of the group (engine-core children)
        assert wait_for(lambda: not _group_members(status.pgid), 15)
        reported = json.loads(frank_cli("engine", "status", "--json", home=console_home, timeout=600).stdout)
        assert reported["state"] == "crashed" and reported["exit"]["signal"] == "SIGKILL"
    finally:
        killed.wait(10)
        own.stop()
    assert own.status().state == "stopped" and not _group_members(status.pgid)
    records = read_records(runner.draw_file("draw-1"))
    assert summary.state == "interrupted"
    assert len(records) == 1 and records[0]["status"] == "failed"
    assert records[0]["error"].startswith("engine unreachable")

    resumed = resume_replay(runner.run_dir, base_url=engine.status().url)
    summary = resumed.run_sync()
    records = read_records(resumed.draw_file("draw-1"))
    assert summary.state == "finished" and summary.draws["draw-1"].complete
    assert [(r["index"], r["attempt"], r["status"]) for r in records] == [(0, 1, "failed"), (0, 2, "ok"), (1, 2, "ok")]
