"""Headless Chromium (Debian's `chromium`, installed by `make chromium`) for tests of pages people look at:
a screenshot and the DOM after scripts ran. No webdriver: two command-line runs of the browser."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("chromium is not installed: `make chromium` (apt-get install chromium)")
    return path


def _run(url: str, profile: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    # --no-sandbox: we run as root; a private profile dir so parallel runs never share state
    cmd = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        f"--user-data-dir={profile}",
        *args,
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def screenshot(url: str, png: Path, size: str = "1000,1800", wait_ms: int = 0) -> Path:
    extra = [f"--virtual-time-budget={wait_ms}"] if wait_ms else []
    res = _run(url, png.parent / "chromium-profile", f"--window-size={size}", f"--screenshot={png}", *extra)
    assert png.is_file() and png.stat().st_size > 0, res.stderr[-2000:]
    return png


def dump_dom(url: str, workdir: Path, wait_ms: int = 0) -> str:
    extra = [f"--virtual-time-budget={wait_ms}"] if wait_ms else []
    res = _run(url, workdir / "chromium-profile", "--dump-dom", *extra)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def colours(png: Path) -> int:
    """How many distinct colours the screenshot has (a blank or failed render has one or two)."""
    from PIL import Image

    with Image.open(png) as img:
        return len(img.convert("RGB").getcolors(maxcolors=1 << 20) or [])


# -- a live page through the DevTools protocol (for pages that keep talking, like `frank serve`) ---------

# Keeps a copy of every text frame and binary frame the page's websockets receive, so a test can read what a
# terminal page (xterm.js draws on a canvas) was sent.
CAPTURE_WEBSOCKETS = """
(() => {
  window.__received = [];
  const Native = window.WebSocket;
  window.WebSocket = function (...args) {
    const ws = new Native(...args);
    ws.addEventListener('message', (e) => {
      if (typeof e.data === 'string') { window.__received.push(e.data); }
      else if (e.data instanceof ArrayBuffer) { window.__received.push(new TextDecoder().decode(e.data)); }
      else if (e.data && e.data.text) { e.data.text().then((t) => window.__received.push(t)); }
    });
    return ws;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, Native);
})();
"""


class LivePage:
    """One headless Chromium tab driven over the DevTools protocol (aiohttp's websocket client)."""

    def __init__(self, workdir: Path, size: tuple[int, int] = (1280, 800)) -> None:
        self.workdir, self.size = workdir, size
        self.proc: subprocess.Popen | None = None
        self.ws = None
        self.session = None
        self.seq = 0

    async def __aenter__(self) -> LivePage:
        import asyncio
        import re

        import aiohttp

        self.proc = subprocess.Popen(
            [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                f"--user-data-dir={self.workdir / 'chromium-live'}",
                "--remote-debugging-port=0",
                f"--window-size={self.size[0]},{self.size[1]}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        port = None
        assert self.proc.stderr is not None
        for _ in range(200):
            line = await asyncio.to_thread(self.proc.stderr.readline)
            found = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if found:
                port = int(found.group(1))
                break
        assert port, "chromium did not open its DevTools port"
        self.session = aiohttp.ClientSession()
        async with self.session.get(f"http://127.0.0.1:{port}/json/list") as resp:
            targets = await resp.json()
        page = next(t for t in targets if t["type"] == "page")
        self.ws = await self.session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        await self.call("Page.enable")
        await self.call("Page.addScriptToEvaluateOnNewDocument", source=CAPTURE_WEBSOCKETS)
        return self

    async def call(self, method: str, **params):
        self.seq += 1
        await self.ws.send_json({"id": self.seq, "method": method, "params": params})
        while True:
            msg = await self.ws.receive_json(timeout=60)
            if msg.get("id") == self.seq:
                assert "error" not in msg, msg
                return msg.get("result", {})

    async def evaluate(self, expression: str):
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result.get("result", {}).get("value")

    async def wait_for(self, expression: str, timeout_s: float):
        import asyncio
        import time

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = await self.evaluate(expression)
            if value:
                return value
            await asyncio.sleep(0.5)
        raise AssertionError(f"not true after {timeout_s} s: {expression}")

    async def screenshot(self, png: Path) -> Path:
        import base64

        data = await self.call("Page.captureScreenshot", format="png")
        png.write_bytes(base64.b64decode(data["data"]))
        return png

    async def __aexit__(self, *exc) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self.session is not None:
            await self.session.close()
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
