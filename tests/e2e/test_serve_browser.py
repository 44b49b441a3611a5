"""`frank serve` in headless Chromium: the page loads, the real console process starts behind it, and the
dashboard (read-only, no engine) is what the browser is sent. A screenshot is kept in the test's tmp dir."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from frank.paths import REPO_ROOT
from tests import chromium


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_refuses_a_non_loopback_address_without_the_flag() -> None:
    from frank.console.cli.serve_cmd import listen_address
    from frank.errors import FrankError

    with pytest.raises(FrankError, match="not a loopback address.*--allow-remote"):
        listen_address("0.0.0.0:8566", allow_remote=False)
    with pytest.raises(FrankError, match="expected HOST:PORT"):
        listen_address("localhost:http", allow_remote=False)
    assert listen_address("0.0.0.0:8566", allow_remote=True) == ("0.0.0.0", 8566)
    assert listen_address("[::1]:8566", allow_remote=False) == ("::1", 8566)


@pytest.mark.timeout(180)
async def test_the_dashboard_appears_in_chromium(fresh_frank_home: Path, tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "frank.console.cli", "serve", "--listen", f"127.0.0.1:{port}", "--read-only"],
        cwd=str(REPO_ROOT),
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "serve.log", "w"),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        else:
            pytest.fail(f"frank serve did not answer: {(tmp_path / 'serve.log').read_text()[-2000:]}")
        async with chromium.LivePage(tmp_path) as page:
            await page.call("Page.navigate", url=f"http://127.0.0.1:{port}/")
            await page.wait_for("document.body.classList.contains('-first-byte')", 90)  # the console answered
            sent = "window.__received.join('')"
            await page.wait_for(f"{sent}.includes('engine metrics') && {sent}.includes('engine log')", 90)
            text = re.sub(r"\x1b\[[0-9;?$]*[A-Za-z]", "", await page.evaluate(sent))  # what the terminal drew
            assert "dashboard — embedded-cpu · stopped · read-only" in text  # the console, read-only, no engine
            assert "no replay or experiment running" in text and "cpu pool" in text
            png = await page.screenshot(tmp_path / "serve.png")
        assert chromium.colours(png) > 10, "the terminal was drawn"
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server and the console it started for the tab
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
