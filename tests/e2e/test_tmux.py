"""End to end: `frank` in a real terminal (tmux). Start the engine with a key, flip the region cache,
launch a short replay from the menu, read the results from the captured pane; then quit (the engine
keeps running) and start the console again: it adopts the engine. One real embedded engine (~1-2 min)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

REPO = Path(__file__).resolve().parents[2]
FRANK = Path(sys.executable).parent / "frank"
TMUX = shutil.which("tmux")


class Pane:
    def __init__(self, home: Path, width: int = 120, height: int = 36) -> None:
        self.name = f"frank-e2e-{uuid.uuid4().hex[:8]}"
        env = {"FRANK_HOME": str(home), "FRANK_MODELS": os.environ.get("FRANK_MODELS", str(REPO / ".build/models"))}
        cmd = " ".join(f"{k}={v}" for k, v in env.items())
        subprocess.run([TMUX, "new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height),
                        f"env {cmd} {FRANK}"], check=True)

    def text(self) -> str:
        return subprocess.run([TMUX, "capture-pane", "-p", "-t", self.name], capture_output=True, text=True).stdout

    def keys(self, *keys: str) -> None:
        for key in keys:
            subprocess.run([TMUX, "send-keys", "-t", self.name, key], check=True)
            time.sleep(0.15)

    def wait_for(self, needle: str, timeout_s: float, gone: str | None = None) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.text()
            if needle in text and (gone is None or gone not in text):
                return text
            time.sleep(0.5)
        raise AssertionError(f"{needle!r} did not appear within {timeout_s:.0f} s; pane:\n{self.text()}")

    def alive(self) -> bool:
        return subprocess.run([TMUX, "has-session", "-t", self.name], capture_output=True).returncode == 0

    def close(self) -> None:
        subprocess.run([TMUX, "kill-session", "-t", self.name], capture_output=True)


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_console_in_tmux_starts_engine_flips_cache_and_replays(fresh_frank_home):
    from engine.controller import EngineController

    controller = EngineController()
    pane = Pane(fresh_frank_home)
    try:
        pane.wait_for("● stopped", 30)
        pane.keys("s")                                             # start the engine with a key
        text = pane.wait_for("● ready", 420)
        assert "ready in" in text and "embedded-cpu" in text
        pid = controller.status().pid

        pane.keys("c")                                             # flip the region cache (live knob)
        pane.wait_for("region_cache = on (live)", 30)
        assert controller.status().knobs["region_cache"] == "on"
        assert controller.status().pid == pid                      # live: no restart

        pane.keys("2")                                             # the replays menu
        pane.wait_for("w01-mini", 15)
        pane.keys("Tab", "BSpace", "BSpace", "BSpace", *"draw-1")   # draws: draw-1
        pane.keys("Tab", "3")                                      # limit: first 3 requests
        pane.keys("BTab", "BTab")                                  # back to the workloads table
        pane.keys("Enter")                                         # launch w01-mini
        text = pane.wait_for("● finished", 300)
        assert "draw-1 3/3 ok" in text, text                     # the draw totals, read from the pane
        assert "0 failed" in text

        pane.keys("q")                                             # quit: the engine keeps running
        deadline = time.monotonic() + 10
        while pane.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not pane.alive()
        assert controller.status().state == "ready" and controller.status().pid == pid

        pane = Pane(fresh_frank_home)                              # a new console adopts it
        text = pane.wait_for("● ready", 30)
        assert f"pid {pid}" in text and "region_cache = on" in text
    finally:
        pane.close()
        controller.stop()
