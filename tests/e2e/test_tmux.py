"""End to end: `frank` in a real terminal (tmux). Start the engine with a key, flip the region cache,
launch a short replay from the menu (its default mode decodes: the dashboard shows the verify step live),
read the results from the captured pane; then quit (the engine keeps running) and start the console
again: it adopts the engine. One real embedded engine (~1-2 min)."""

from __future__ import annotations

import time

import pytest

from tests.e2e.tmux import TMUX, Console, kill_server, new_socket

pytestmark = [pytest.mark.e2e, pytest.mark.engine]


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_console_in_tmux_starts_engine_flips_cache_and_replays(fresh_frank_home):
    from frank.engine.controller import EngineController

    controller = EngineController()
    socket = new_socket()
    pane = Console(socket, {"FRANK_HOME": str(fresh_frank_home)})
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

        pane = Console(socket, {"FRANK_HOME": str(fresh_frank_home)})  # a new console adopts it
        pane.wait_for("● ready", 30)
        # the same engine and its live knob, once the pane has its whole layout: the first frames of a
        # console starting in a pane can show the state line before the rest (a CI run caught one)
        pane.wait_for(f"pid {pid}", 15)
        pane.wait_for("region_cache = on", 15)
    finally:
        pane.close()
        kill_server(socket)
        controller.stop()
