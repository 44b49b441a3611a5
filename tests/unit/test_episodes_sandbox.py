"""The episodes' bubblewrap sandbox on its own (frank.episodes.sandbox): what a command inside sees and cannot
reach, that the limits kill the whole sandbox, processes that detached themselves included, and that
sandboxes share nothing: no kernel key, no launcher environment, no host path."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import time
from pathlib import Path

from frank.episodes.sandbox import UID, Sandbox, prepare_workspace, processes_in, run_once, spawn_options

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


KEYS = r"""
import ctypes, platform, sys
ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
desc = sys.argv[2].encode()
for ring in (-4, -5, -3):  # the user keyring, the user-session keyring, the session keyring
    if sys.argv[1] == "add":
        got = libc.syscall(ADD_KEY, b"user", desc, b"seen while graded", ctypes.c_size_t(17), ctypes.c_int(ring))
    else:  # KEYCTL_SEARCH
        got = libc.syscall(KEYCTL, ctypes.c_int(10), ctypes.c_int(ring), b"user", desc, ctypes.c_int(0))
    print(ring, got, ctypes.get_errno())
    if sys.argv[1] == "find" and got > 0:
        libc.syscall(KEYCTL, ctypes.c_int(21), ctypes.c_int(got))  # KEYCTL_INVALIDATE: leave nothing behind
"""


def test_a_key_stashed_in_one_sandbox_is_not_readable_in_the_next(tmp_path):
    """Kernel keyrings outlive a process and are shared by every process of a uid: one sandbox's code could
    stash what it saw (a draw's hidden inputs) for a later sandbox. The seccomp filter refuses the keyring
    syscalls in every sandbox; the same two steps as uid 65534 without the filter show the channel is real."""
    ws = _workspace(tmp_path)
    desc = f"frank-test-{secrets.token_hex(4)}"
    first = _run(ws, KEYS.replace("sys.argv[1]", "'add'").replace("sys.argv[2]", repr(desc)))
    second = _run(ws, KEYS.replace("sys.argv[1]", "'find'").replace("sys.argv[2]", repr(desc)))
    assert first.returncode == second.returncode == 0, (first.stderr, second.stderr)
    assert [line.split()[1:] for line in first.stdout.decode().splitlines()] == [["-1", "38"]] * 3  # ENOSYS
    assert [line.split()[1] for line in second.stdout.decode().splitlines()] == ["-1"] * 3
    python = shutil.which("python3", path="/usr/bin:/bin")  # one nobody can run (frank's may be under /root)
    assert python, "the system's python3 (Debian's) runs the control"
    as_nobody = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", python, "-I", "-c", KEYS]
    added = subprocess.run([*as_nobody, "add", desc], capture_output=True, text=True, timeout=60, cwd="/")
    found = subprocess.run([*as_nobody, "find", desc], capture_output=True, text=True, timeout=60, cwd="/")
    assert int(added.stdout.split()[1]) > 0, added  # outside a sandbox the key is made in nobody's keyring ...
    assert int(found.stdout.split()[1]) > 0, found  # ... and another process of nobody's reads it


SCAN = r"""
import os, sys, time
marker, host = sys.stdin.buffer.read().split(b"\n")  # not in argv: the scan would find its own cmdline


def scan():
    seen = set()
    for pid in os.listdir("/proc"):
        for name in ("environ", "cmdline", "mountinfo") if pid.isdigit() else ():
            try:
                with open(f"/proc/{pid}/{name}", "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            seen |= {f"{name}: the launcher's environment"} if marker in data else set()
            seen |= {f"{name}: the workspace's host path"} if host in data else set()
    return seen


print(sorted(scan()) or "nothing")
sys.stdout.flush()
if os.fork() == 0:  # a watcher left running, reading /proc while the next commands start
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    seen, end = set(), time.monotonic() + 30
    while not os.path.exists("/tmp/stop") and time.monotonic() < end:
        seen |= scan()
    with open("/tmp/seen", "w") as fh:
        fh.write("\n".join(sorted(seen)) or "nothing")
    os._exit(0)
"""


def test_the_launchers_environment_and_the_host_path_never_reach_the_sandbox(tmp_path, monkeypatch):
    """The agent's first command finds the launcher's environment nowhere in /proc (every process of the
    sandbox starts with the sandbox's own), nor the workspace's host path (the workspace is a copy on the
    sandbox's own tmpfs); a watcher it leaves behind sees neither while more commands start."""
    marker = f"frank-launcher-{secrets.token_hex(6)}"
    monkeypatch.setenv("FRANK_LAUNCHER_SECRET", marker)
    ws = _workspace(tmp_path)
    sandbox = Sandbox(ws)
    try:

        def run(*cmd: str, input: bytes = b"") -> subprocess.CompletedProcess:
            argv = sandbox.command(list(cmd))
            return subprocess.run(argv, input=input, capture_output=True, timeout=60, **spawn_options())

        first = run("python3", "-c", SCAN, input=f"{marker}\n{ws}".encode())
        assert first.returncode == 0, first.stderr
        assert first.stdout.decode().strip() == "nothing"
        for _ in range(40):  # each start passes nsenter, setpriv and env: moments a leak would show in
            run("true")
        run("touch", "/tmp/stop")
        deadline = time.monotonic() + 30
        seen = run("cat", "/tmp/seen")
        while seen.returncode != 0 and time.monotonic() < deadline:
            seen = run("cat", "/tmp/seen")
        assert seen.stdout.decode() == "nothing"
    finally:
        sandbox.close()
