"""The episodes' bubblewrap sandbox on its own (frank.episodes.sandbox): what a command inside sees and cannot
reach, and that the limits kill the whole sandbox, processes that detached themselves included."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from frank.episodes.sandbox import Sandbox, prepare_workspace, processes_in, run_once

REPO = Path(__file__).resolve().parents[2]


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "given.txt").write_text("task file\n")
    (tmp_path / "beside.expected.json").write_text('{"secret": 1}')
    prepare_workspace(ws)
    return ws


def _run(ws: Path, code: str, **kw):
    return run_once(["python3", "-I", "-c", code], ws, **kw)


def test_inside_a_stdlib_python_as_nobody_sees_only_its_workspace(tmp_path):
    ws = _workspace(tmp_path)
    done = _run(
        ws,
        "import os, sys, json\n"
        "print(json.dumps({'uid': os.getuid(), 'cwd': os.getcwd(), 'files': sorted(os.listdir('.')),\n"
        " 'top': sorted(os.listdir('/')), 'env': dict(os.environ), 'site': sorted(os.listdir(sys.path[-1]))}))",
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert (seen["uid"], seen["cwd"], seen["files"]) == (65534, "/workspace", ["given.txt"])
    assert "work" not in seen["top"] and "beside.expected.json" not in seen["top"]
    assert "PYTHONPATH" not in seen["env"] and not any(str(REPO) in v for v in seen["env"].values())
    assert seen["site"] == []  # the interpreter's site-packages are hidden
    for path in (str(tmp_path / "beside.expected.json"), str(REPO / "frank"), "/etc/shadow", "/sys/kernel"):
        done = _run(ws, f"open({path!r})")
        assert done.returncode == 1 and b"FileNotFoundError" in done.stderr, path
    done = _run(ws, "open('new.txt', 'w').write('x')")  # a copy: kept only when asked
    assert done.returncode == 0 and not (ws / "new.txt").exists()
    done = _run(ws, "open('new.txt', 'w').write('x')", keep=True)
    assert done.returncode == 0 and (ws / "new.txt").read_text() == "x"
    done = _run(ws, "import socket; socket.create_connection(('1.1.1.1', 443), timeout=3)")
    assert b"Network is unreachable" in done.stderr


def test_limits_kill_the_whole_sandbox_detached_processes_included(tmp_path):
    ws = _workspace(tmp_path)
    detach = "import subprocess; subprocess.Popen(['setsid', 'sleep', '600'], start_new_session=True)\n"
    done = _run(ws, detach + "import time; time.sleep(600)", wall_s=1)
    assert done.limit == "wall time" and done.seconds < 30
    done = _run(ws, detach + "print('x' * 10_000_000)", output_bytes=1000)
    assert done.limit == "output" and len(done.stdout) == 1000
    done = _run(ws, "while True: pass", cpu_s=1, wall_s=60)
    assert done.limit == "CPU time" and done.seconds < 30
    done = _run(ws, "bytearray(5 * 1024**3)")  # past the 4 GiB every sandboxed command has
    assert b"MemoryError" in done.stderr
    assert not _sleepers(), "a process of a killed sandbox is still running"


def test_an_episode_sandbox_outlives_its_commands_and_dies_whole(tmp_path):
    ws = _workspace(tmp_path)
    sandbox = Sandbox(ws)
    try:
        run = subprocess.run(
            sandbox.command(["sh", "-c", "setsid sleep 600 >/dev/null 2>&1 < /dev/null & echo started"]),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.stdout == "started\n"
        assert len(sandbox.processes()) >= 2  # the holder and the detached sleep, between commands
    finally:
        assert sandbox.close() == []
    assert processes_in(sandbox.pid_namespace) == [] and not _sleepers()


def _sleepers() -> list[int]:
    time.sleep(0.1)
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if (proc / "cmdline").read_bytes() == b"sleep\x00600\x00":
                    found.append(int(proc.name))
            except OSError:
                continue
    return found
