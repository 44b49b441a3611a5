"""The controller against the real embedded vLLM engine: start, chat, adopt, refuse a second start, flip a
restart knob, then stop with a long request in flight (the stop escalates; nothing of the group left). Its
own FRANK_HOME, two engine starts. The first starts in bfloat16 (a knob given to `frank engine start`), so
tests/integration/test_fidelity_engine.py's check that a bfloat16 start is far above the float32 floor runs
on it, against the shared engine: one vLLM start fewer. kill -9 of a server (the controller reports
`crashed`, the supervisor cleans up the group) is checked on the console's engine that tests/e2e/test_tmux.py
kills mid-request."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import httpx
import psutil
import pytest

from frank.engine.controller import EngineController, EngineError, _group_members
from frank.engine.metrics.names import RUNNING
from frank.engine.profiles import ProfileError
from tests.integration.test_fidelity_engine import check_bfloat16_is_far_above_the_float32_floor
from tests.polling import wait_for

pytestmark = pytest.mark.engine


def chat(url: str, text: str, max_tokens: int = 16) -> dict:
    body = {
        "model": "tiny-frank",
        "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)
    response.raise_for_status()
    return response.json()


def test_engine_lifecycle(frank_cli, fresh_frank_home, engine, session_home, tmp_path):
    controller = EngineController()
    started = frank_cli("engine", "start", "--knob", "dtype=bfloat16", "--json", timeout=600)
    assert started.returncode == 0, started.stderr
    status = json.loads(started.stdout)
    assert status["state"] == "ready" and status["profile"] == "embedded-cpu"
    assert status["url"].startswith("http://127.0.0.1:") and status["ready_s"] > 0
    assert status["knobs"] == {
        "num_speculative_tokens": 4,
        "region_cache": "off",
        "dtype": "bfloat16",
        "detok_tail": "off",
        "block_hash_memo": "off",
        "held_prompt": "off",
    }
    pgid = status["pgid"]
    try:
        # the state dir and the record holding the token are private to the user
        assert os.stat(controller.files.root).st_mode & 0o777 == 0o700
        assert os.stat(controller.files.record).st_mode & 0o777 == 0o600
        reply = chat(status["url"], "def add(a, b):\n    return a + b\n")
        assert reply["usage"]["completion_tokens"] > 0
        check_bfloat16_is_far_above_the_float32_floor(frank_cli, fresh_frank_home, session_home, tmp_path)

        # a second controller (another console) adopts it and refuses to start a second engine
        second = EngineController()
        adopted = second.status()
        assert adopted.state == "ready" and adopted.pid == status["pid"]
        with pytest.raises(EngineError, match="already running"):
            second.start()

        # a restart knob restarts the engine with the new value, and says so
        flip = frank_cli("engine", "knob", "num_speculative_tokens", "2", "--json", timeout=600)
        assert flip.returncode == 0, flip.stderr
        change = json.loads(flip.stdout)
        assert change["applied"] == "restart" and change["old"] == 4 and change["new"] == 2
        assert not _group_members(pgid), "the old engine's process group must be gone"
        after = controller.status()
        assert after.state == "ready" and after.knobs["num_speculative_tokens"] == 2 and after.pid != status["pid"]
        argv = json.loads(controller.files.record.read_text())["argv"]
        assert '"num_speculative_tokens":2' in argv[argv.index("--speculative-config") + 1]
        changes = controller.files.knob_changes.read_text().splitlines()
        assert json.loads(changes[-1])["applied"] == "restart"
        pgid, members = after.pgid, _group_members(after.pgid)
        assert after.pid in members and len(members) >= 2

        # a long request in flight makes the API server wait for it on SIGTERM: stop must still finish
        body = {"model": "tiny-frank", "prompt": "x " * 2000, "max_tokens": 4000, "ignore_eos": True}
        sender = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import httpx; httpx.post({after.url + '/v1/completions'!r}, json={body!r}, timeout=600)",
            ]
        )
        try:
            assert wait_for(lambda: _running_requests(after.url) >= 1, 60), "the long request never ran"
            t0 = time.monotonic()
            stopped = frank_cli("engine", "stop", "--grace", "3", "--json", timeout=120)
            took = time.monotonic() - t0
        finally:
            sender.kill()
            sender.wait()
        assert stopped.returncode == 0 and json.loads(stopped.stdout)["state"] == "stopped"
        assert took < 40
        assert not _group_members(pgid)
        assert not any(
            psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in members
        )
    finally:
        controller.stop()
    assert controller.status().state == "stopped"
    assert not _group_members(pgid)


def _running_requests(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.split("{")[0].split()[0] == RUNNING)


def test_refusals_name_the_problem(frank_cli, fresh_frank_home, tmp_path):
    from frank import paths

    user_dir = paths.user_profiles_dir()
    user_dir.mkdir(parents=True)
    base = (paths.REPO_ROOT / "frank" / "engine" / "profiles" / "embedded-cpu.toml").read_text()

    # a taken port
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        (user_dir / "fixed.toml").write_text(
            base.replace('name = "embedded-cpu"', 'name = "fixed"').replace('port = "auto"', f"port = {port}")
        )
        result = frank_cli("engine", "start", "--profile", "fixed", timeout=600)
        assert result.returncode != 0
        assert f"port: {port} on 127.0.0.1 is taken" in result.stderr and "fixed.toml" in result.stderr

    # a missing model
    (user_dir / "nomodel.toml").write_text(
        base.replace('name = "embedded-cpu"', 'name = "nomodel"').replace(
            '"@models/tiny-frank"', f'"{tmp_path}/absent-model"'
        )
    )
    result = frank_cli("engine", "start", "--profile", "nomodel", timeout=600)
    assert result.returncode != 0 and f"model: {tmp_path}/absent-model does not exist" in result.stderr

    # a python without vLLM
    (user_dir / "novllm.toml").write_text(
        base.replace('name = "embedded-cpu"', 'name = "novllm"').replace('"@engine-venv"', f'"{sys.executable}"')
    )
    with pytest.raises(ProfileError, match="python: vllm is not importable"):
        EngineController().start("novllm")
    # a missing python
    (user_dir / "nopython.toml").write_text(
        base.replace('name = "embedded-cpu"', 'name = "nopython"').replace(
            '"@engine-venv"', '"/nonexistent/bin/python"'
        )
    )
    result = frank_cli("engine", "start", "--profile", "nopython", timeout=600)
    assert result.returncode != 0
    assert "nopython.toml: python: /nonexistent/bin/python does not exist" in result.stderr
    # the frankenstein profile here: its model is not on this machine
    result = frank_cli("engine", "start", "--profile", "frankenstein", timeout=600)
    assert result.returncode != 0
    assert "frankenstein.toml: model: /models/DeepSeek-V4.1-Flash-1017-EXL3-3.0bpw does not exist" in result.stderr
    assert EngineController().status().state == "stopped"
