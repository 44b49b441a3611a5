"""`frank serve` in headless Chromium: the page loads, the real console process starts behind it, and the
dashboard (read-only, no engine) is what the browser is sent; off loopback, behind its token, every request
without it gets 401 and the browser that opens the token's URL gets the console. A screenshot is kept in the
test's tmp dir."""

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


def start_serve(tmp_path: Path, *args: str) -> subprocess.Popen:
    server = subprocess.Popen(
        [sys.executable, "-m", "frank.console.cli", "serve", *args],
        cwd=str(REPO_ROOT),
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "serve.log", "w"),
        start_new_session=True,
    )
    return server


def wait_answering(tmp_path: Path, url: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.3)
    pytest.fail(f"frank serve did not answer: {(tmp_path / 'serve.log').read_text()[-2000:]}")


def stop(server: subprocess.Popen) -> None:
    os.killpg(server.pid, signal.SIGTERM)  # the server and the console it started for the tab
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


async def see_the_dashboard(tmp_path: Path, url: str) -> None:
    async with chromium.LivePage(tmp_path) as page:
        await page.call("Page.navigate", url=url)
        await page.wait_for("document.body.classList.contains('-first-byte')", 90)  # the console answered
        sent = "window.__received.join('')"
        await page.wait_for(f"{sent}.includes('engine metrics') && {sent}.includes('engine log')", 90)
        text = re.sub(r"\x1b\[[0-9;?$]*[A-Za-z]", "", await page.evaluate(sent))  # what the terminal drew
        assert "dashboard — embedded-cpu · stopped · read-only" in text  # the console, read-only, no engine
        assert "nothing running: launch a replay" in text and "cpu pool" in text
        png = await page.screenshot(tmp_path / "serve.png")
    assert chromium.colours(png) > 10, "the terminal was drawn"


@pytest.mark.timeout(180)
async def test_the_dashboard_appears_in_chromium(fresh_frank_home: Path, tmp_path: Path) -> None:
    port = free_port()
    server = start_serve(tmp_path, "--listen", f"127.0.0.1:{port}", "--read-only")
    try:
        wait_answering(tmp_path, f"http://127.0.0.1:{port}/")
        await see_the_dashboard(tmp_path, f"http://127.0.0.1:{port}/")
    finally:
        stop(server)


def command_lines(pid: int) -> str:
    """The command lines of a process and every descendant (what `ps` shows of them)."""
    import psutil

    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return "\n".join(" ".join(p.cmdline()) + "\n" + " ".join(f"{k}={v}" for k, v in p.environ().items()) for p in procs)


@pytest.mark.timeout(240)
async def test_off_loopback_every_request_without_the_token_gets_401_and_the_token_gets_the_console(
    frank_cli, fresh_frank_home: Path, tmp_path: Path
) -> None:
    """Attempts that must get nothing: no token, a wrong one, a near miss, the page's scripts and its
    websocket without it; the token never shows in the server's log, its process listing or environment."""
    port, token = free_port(), "t0k3n-" + os.urandom(12).hex()
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o644)
    listen = ["--listen", f"0.0.0.0:{port}", "--read-only", "--public-url", f"http://127.0.0.1:{port}"]
    refused = frank_cli("serve", *listen, "--allow-remote", "--token-file", str(token_file), timeout=60)
    assert refused.returncode != 0 and "mode 644; make it 0600" in refused.stderr, refused.stderr
    refused = frank_cli("serve", "--listen", f"0.0.0.0:{port}", timeout=60)
    assert refused.returncode != 0 and "not a loopback address" in refused.stderr, refused.stderr
    token_file.chmod(0o600)
    server = start_serve(tmp_path, *listen, "--allow-remote", "--token-file", str(token_file))
    base = f"http://127.0.0.1:{port}"
    try:
        wait_answering(tmp_path, base + "/")
        for path, headers in [
            ("/", {}),
            ("/?token=", {}),
            (f"/?token={token[:-1]}", {}),
            (f"/?token={token}x", {}),
            ("/static/js/textual.js", {}),
            ("/ws", {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13"}),
            ("/", {"Authorization": f"Bearer {token[:-1]}"}),
            ("/", {"Cookie": f"frank_serve_token={token.upper()}"}),
        ]:
            answer = httpx.get(base + path, headers=headers, timeout=10, follow_redirects=False)
            assert answer.status_code == 401, (path, answer.status_code)
            assert "textual" not in answer.text.lower() and "set-cookie" not in answer.headers, path
        opened = httpx.get(f"{base}/?token={token}", timeout=10, follow_redirects=False)
        assert opened.status_code == 302 and opened.headers["location"] == "/"  # the token leaves the address bar
        assert "HttpOnly" in opened.headers["set-cookie"] and "SameSite=Strict" in opened.headers["set-cookie"]
        with httpx.Client(base_url=base, cookies=opened.cookies) as client:
            assert client.get("/", timeout=10).status_code == 200
        assert httpx.get(base + "/", headers={"Authorization": f"Bearer {token}"}, timeout=10).status_code == 200
        await see_the_dashboard(tmp_path, f"{base}/?token={token}")  # the browser: cookie, console, websocket
        assert token not in command_lines(server.pid)
    finally:
        stop(server)
    log = (tmp_path / "serve.log").read_text()
    assert f"{base}/?token=<{token_file}>" in log and token not in log, log[-2000:]


def test_a_generated_token_is_written_0600_and_not_logged(fresh_frank_home: Path, tmp_path: Path) -> None:
    port = free_port()
    server = start_serve(tmp_path, "--listen", f"0.0.0.0:{port}", "--allow-remote", "--read-only")
    try:
        wait_answering(tmp_path, f"http://127.0.0.1:{port}/")
        token_file = next(fresh_frank_home.rglob("serve-token"))
        assert token_file.stat().st_mode & 0o777 == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 32
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=10).status_code == 401
        headers = {"Authorization": f"Bearer {token}"}
        assert httpx.get(f"http://127.0.0.1:{port}/", headers=headers, timeout=10).status_code == 200
    finally:
        stop(server)
    log = (tmp_path / "serve.log").read_text()
    assert str(token_file) in log and token not in log, log[-2000:]
