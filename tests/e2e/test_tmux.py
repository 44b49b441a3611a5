"""End to end: `frank` in a real terminal (tmux) on a fresh FRANK_HOME. The console offers the start, starts
the engine, launches a short replay from the menu (its default mode decodes: the dashboard shows the verify
step live), flips the region cache mid-draw and reads the marked rows and the draw's totals from the
captured pane; then quit (the engine keeps running) and start the console again: it adopts the engine. One
real embedded engine (~1-2 min).

Then a real crash on that engine, which the console left running (one vLLM start fewer than an engine of its
own): a replay's server is SIGKILLed mid-request, and the run resumes on the shared engine."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from frank.engine.controller import EngineController, _group_members
from frank.workloads.replay import ReplayOptions, read_records, resume_replay, start_replay
from frank.workloads.w01 import make_w01
from tests.e2e.tmux import TMUX, Console, kill_server, new_socket
from tests.polling import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.engine]
ROW = r"\bd1-\w+-r\d\d +[0-9.]+ (ms|s) "  # a row of the replays screen's request table: id, then TTFT


@pytest.fixture(scope="module")
def console_home(tmp_path_factory: pytest.TempPathFactory):
    """The console's FRANK_HOME; whatever engine is left running there is stopped when the module ends."""
    home = tmp_path_factory.mktemp("console-home")
    yield home
    EngineController(state_dir=home / "state").stop()


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_console_in_tmux_offers_the_start_replays_and_marks_a_cache_flip_mid_draw(console_home: Path):
    """A newcomer's first minutes on a fresh FRANK_HOME: the console offers to start the engine (naming the
    profile and what a start takes), starts it, launches W01 mini from the menu; `c` flips the region cache
    mid-draw, and the request table marks the requests served after the flip and the draw's totals say
    that it spans one."""
    controller = EngineController(state_dir=console_home / "state")
    socket = new_socket()
    pane = Console(socket, {"FRANK_HOME": str(console_home)})
    try:
        text = pane.wait_for("Start the engine?", 30)  # the offer, on a stopped engine
        assert "embedded-cpu" in text and "a minute or more" in text, text
        pane.keys("y")  # accept it
        # ready, and the start action finished (until then the panel says "starting…" and keys wait)
        text = pane.wait_for("● ready", 420, gone="starting…")
        assert "ready in" in text and "embedded-cpu" in text
        pid = controller.status().pid
        assert controller.files.last_ready("embedded-cpu") is not None  # the next offer names it

        pane.keys("2")  # the replays menu
        pane.wait_for("w01-mini", 15)
        pane.keys("Tab", "BSpace", "BSpace", "BSpace", *"draw-1")  # draws: draw-1
        pane.keys("Tab", "1", "2")  # limit: the first 12 requests (after the first, a fraction of a second each)
        pane.keys("BTab", "BTab")  # back to the workloads table
        pane.keys("Enter")  # launch w01-mini in the menu's default mode: it decodes (verify steps)
        pane.wait_for("started (pid", 60)  # the launch's notification (a key pressed before it lands would
        # take the launch off its screen)
        pane.wait_for_match(ROW, 240)  # the first request recorded (the slow one: its prompt is not cached)
        pane.keys("c")  # flip the region cache (live knob) mid-draw
        pane.wait_for("region_cache: off → on (live)", 30)
        assert controller.status().knobs["region_cache"] == "on"
        assert controller.status().pid == pid  # live: no restart
        pane.keys("1")  # what the console is for: the dashboard shows the verify step live, a number
        pane.wait_for_match(r"verify step +[0-9][0-9.]* (µs|ms|s)\b", 120)
        pane.keys("2")
        pane.wait_for("● finished", 300)
        # the draw totals, read from the pane once the toasts that say it finished are gone
        text = pane.wait_for("draw-1 12/12 ok · 0 failed · spans a flip", 30)
        assert "region_cache off → on at d1-" in text, text
        rows = [line.rstrip() for line in text.splitlines() if re.search(ROW, line)]  # the request table's
        assert len(rows) == 12 and rows[0].endswith(" off"), rows  # served before the flip
        assert any(re.search(r"[→⇄]on$", line) for line in rows), rows  # the flip, marked on its row
        assert rows[-1].endswith("on"), rows  # served after it

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
        assert "Start the engine?" not in pane.text()  # a running engine is adopted, not offered
    finally:  # the engine is left running for the crash test below (console_home stops it in the end)
        pane.close()
        kill_server(socket)


def test_engine_killed_during_a_request_then_resumed_on_another_engine(frank_cli, engine, console_home, tmp_path):
    """A real crash: the console's engine (the test above leaves it running; started here when run alone) has
    its server SIGKILLed while a replay's first request is in it (the engine's core held still, so that the
    request cannot finish first). The controller reports `crashed` with the signal and the log tail, and the
    supervisor cleans up the rest of the group; the run records the failure and stops; resuming it against the
    shared engine finishes the draw."""
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
            # the engine's core (the server's children) held still: the request waits in the server however
            # fast this machine prefills (a quiet one finished both requests inside the half second)
            core = psutil.Process(status.pid).children(recursive=True)
            for proc in core:
                proc.suspend()

            def kill():
                os.kill(status.pid, signal.SIGKILL)
                for proc in core:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        proc.resume()
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
