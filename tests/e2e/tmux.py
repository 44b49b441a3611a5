"""`frank` in a real terminal: one tmux session on a private tmux server (`-L SOCKET`).

tmux sessions inherit the tmux *server's* environment, not the client's, so each test runs its own server
and the console gets FRANK_HOME, FRANK_MODELS and PYTHONPATH explicitly on its command line (and neither
COLUMNS nor LINES: its pane's size is its terminal's)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

TMUX = shutil.which("tmux")
FRANK = Path(sys.executable).parent / "frank"


class Console:
    def __init__(self, socket: str, env: dict[str, str] | None = None, width: int = 120, height: int = 36) -> None:
        self.socket = socket
        self.name = f"frank-e2e-{uuid.uuid4().hex[:8]}"
        passed = {k: os.environ[k] for k in ("FRANK_HOME", "FRANK_MODELS", "PYTHONPATH") if os.environ.get(k)}
        passed.update(env or {})
        # GNU readline, loaded into the test process, exports COLUMNS and LINES (80x24 here) at the C level:
        # the tmux server inherits them and a console would take them over its pane's size
        cmd = "env -u COLUMNS -u LINES " + " ".join(f"{k}={v}" for k, v in passed.items()) + f" {FRANK}"
        self.tmux("new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height), cmd)
        self.pid = int(self.tmux("display-message", "-p", "-t", self.name, "#{pane_pid}").strip())

    def tmux(self, *args: str) -> str:
        return subprocess.run([TMUX, "-L", self.socket, *args], check=True, capture_output=True, text=True).stdout

    def text(self) -> str:
        return subprocess.run(
            [TMUX, "-L", self.socket, "capture-pane", "-p", "-t", self.name], capture_output=True, text=True
        ).stdout

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", self.name, key)
            time.sleep(0.15)

    def wait_for(self, needle: str, timeout_s: float, gone: str | None = None) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.text()
            if needle in text and (gone is None or gone not in text):
                return text
            time.sleep(0.3)
        raise AssertionError(f"{needle!r} did not appear within {timeout_s:.0f} s; pane:\n{self.text()}")

    def pick_front_end_mode(self) -> None:
        """On the Replays menu, from the draws field: choose the front-end mode (one output token a request)
        in the mode menu, then come back to the draws field. For tests of jobs, not of decoding: their
        draws take a third of the decode mode's time."""
        self.keys("Tab", "Tab", "Enter", "Down", "Enter", "BTab", "BTab")

    def wait_for_match(self, pattern: str, timeout_s: float) -> re.Match[str]:
        """The first match of `pattern` on the pane within the time."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = re.search(pattern, self.text())
            if found:
                return found
            time.sleep(0.3)
        raise AssertionError(f"{pattern!r} did not appear within {timeout_s:.0f} s; pane:\n{self.text()}")

    def alive(self) -> bool:
        return (
            subprocess.run([TMUX, "-L", self.socket, "has-session", "-t", self.name], capture_output=True).returncode
            == 0
        )

    def close(self) -> None:
        """Kill the session: the console gets SIGHUP, as from a dropped SSH connection."""
        subprocess.run([TMUX, "-L", self.socket, "kill-session", "-t", self.name], capture_output=True)


def new_socket() -> str:
    return f"frank-test-{uuid.uuid4().hex[:8]}"


def kill_server(socket: str) -> None:
    subprocess.run([TMUX, "-L", socket, "kill-server"], capture_output=True)
