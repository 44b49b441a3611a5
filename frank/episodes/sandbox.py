"""The episodes' sandbox: bubblewrap namespaces in which the agent's tools and the agent's code run.

Inside, a process sees a read-only system (/usr and the /etc pieces programs need), a stdlib-only Python
(the interpreter frank runs on, its site-packages hidden), a private /tmp and /var/tmp, /dev and /proc of
its own, and the episode's workspace at /workspace; nothing of the project, the run folder, the hidden
answers, the graders, other draws or other runs is mounted. It runs as uid/gid 65534 with no
capabilities and no_new_privs, in its own mount, PID, network (loopback only), IPC and UTS namespaces.

Two shapes, one layout:
- `Sandbox`: one per episode. A bwrap holds the namespaces for the episode's lifetime (so a server a tool
  starts, like inspect's text-editor helper, lives between tool calls); each command enters them with
  nsenter and drops to uid 65534. `close()` kills the holder: the namespace's init dies, and the kernel
  kills every process left in the PID namespace; `close()` then checks that none is left.
- `run_once`: one command in a fresh sandbox (graders' probes of the agent's code), with CPU-time,
  memory, process and output limits; at the wall-clock limit the whole sandbox is killed.

bwrap runs as root here (it needs no user namespace then, and binds paths only root can traverse); the
sandboxed processes are dropped to 65534 by setpriv. Standard library only: the agent venv imports it.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

UID = GID = 65534
WORKSPACE = "/workspace"
PATH = "/usr/local/bin:/usr/bin:/bin"
TMPFS_BYTES = 512 * 1024 * 1024  # each of /tmp and /var/tmp: tmpfs lives in RAM
# /etc pieces that shells, the dynamic loader and inspect's OS probe read; nothing else of /etc
ETC = (
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "host.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "os-release",
    "debian_version",
    "profile",
    "bash.bashrc",
    "inputrc",
    "mime.types",
)


class SandboxUnavailable(RuntimeError):
    """bubblewrap, nsenter or setpriv is missing, or frank does not run as root."""


def _tool(name: str) -> str:
    found = shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")
    if not found:
        raise SandboxUnavailable(f"{name} not found (`make setup` installs bubblewrap; util-linux has the rest)")
    return found


def check_available() -> None:
    if os.geteuid() != 0:
        raise SandboxUnavailable("the episodes sandbox needs root: bwrap binds as root and drops to uid 65534")
    for name in ("bwrap", "nsenter", "setpriv", "env"):
        _tool(name)


def interpreter() -> Path:
    """The Python frank runs on (the base install, not a venv): the sandbox's `python3`."""
    return Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"


def _system_args() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr", "--perms", "0755", "--tmpfs", "/usr/local"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / top
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{top}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{top}"]
    args += ["--perms", "0755", "--dir", "/etc", "--perms", "0755", "--dir", "/var"]
    for name in ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    # the interpreter: its stdlib read-only, its site-packages an empty directory
    base = Path(sys.base_prefix)
    exe = interpreter()
    if not str(base).startswith("/usr/"):
        parts = base.parts
        for k in range(2, len(parts) + 1):
            args += ["--perms", "0755", "--dir", str(Path(*parts[:k]))]
        args += ["--perms", "0755", "--dir", str(exe.parent)]
        args += ["--ro-bind", str(base / "lib"), str(base / "lib"), "--ro-bind", str(exe), str(exe)]
    site = base / "lib" / exe.name / "site-packages"
    if site.is_dir():
        args += ["--perms", "0755", "--tmpfs", str(site)]
    args += ["--dir", "/usr/local/bin"]
    for name in ("python3", "python"):
        args += ["--symlink", str(exe), f"/usr/local/bin/{name}"]
    args += ["--remount-ro", "/usr/local"]
    return args


def bwrap_args(workspace: Path, *, writable: bool = True) -> list[str]:
    """bwrap's argv up to (not including) the command: the layout above, the workspace at /workspace."""
    args = [_tool("bwrap"), *_system_args()]
    args += ["--dev", "/dev", "--proc", "/proc"]
    for tmp in ("/tmp", "/var/tmp"):
        args += ["--perms", "1777", "--size", str(TMPFS_BYTES), "--tmpfs", tmp]
    args += ["--bind" if writable else "--ro-bind", str(Path(workspace).resolve()), WORKSPACE]
    args += ["--chdir", WORKSPACE, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    args += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv"]
    return args


def base_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a sandboxed command: nothing inherited (no PYTHONPATH, no proxies)."""
    env = {"PATH": PATH, "HOME": "/tmp", "USER": "nobody", "LOGNAME": "nobody", "LANG": "C.UTF-8", "TERM": "dumb"}
    for key, value in (extra or {}).items():
        if key not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "LD_PRELOAD", "LD_LIBRARY_PATH"):
            env[key] = value
    return env


def drop_args(env: dict[str, str] | None = None, cwd: str = WORKSPACE) -> list[str]:
    """Become uid/gid 65534 with no capabilities and no_new_privs, in `cwd`, with exactly `base_env(env)`."""
    return [
        _tool("setpriv"),
        f"--reuid={UID}",
        f"--regid={GID}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
        _tool("env"),
        "-i",
        f"--chdir={cwd}",
        *(f"{k}={v}" for k, v in base_env(env).items()),
    ]


def prepare_workspace(workspace: Path) -> None:
    """Hand the workspace to the sandbox user (frank, as root, created it)."""
    root = Path(workspace)
    os.chown(root, UID, GID, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), UID, GID, follow_symlinks=False)


def limits_preexec(
    cpu_s: int | None = None, memory_bytes: int | None = None, nproc: int = 256, file_bytes: int | None = None
) -> Callable[[], None]:
    """Resource limits set in the child before it execs bwrap/nsenter; every sandboxed process inherits them."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        if cpu_s is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        if memory_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        if file_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))

    return apply


def _read_info(fd: int) -> dict:
    buf = b""
    while chunk := os.read(fd, 65536):
        buf += chunk
    os.close(fd)
    return json.loads(buf) if buf.strip() else {}


def _ns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) from /proc/PID/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def processes_in(pid_namespace: int) -> list[int]:
    """Host pids of the live processes in a PID namespace (by its inode, from bwrap's --info-fd); zombies,
    already dead and waiting for their parent to reap them, are not counted."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _ns_inode(int(entry)) == pid_namespace:
            stat = _stat(int(entry))
            if stat is not None and stat[0] != "Z":
                found.append(int(entry))
    return found


def _kill_namespace(monitor: subprocess.Popen, pid_namespace: int | None) -> list[int]:
    """SIGKILL bwrap; its init dies with it and the kernel kills the rest of the PID namespace. Any
    process still there after a moment is killed by pid and returned (there should be none)."""
    try:
        os.killpg(monitor.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    monitor.wait()
    if pid_namespace is None:
        return []
    deadline = time.monotonic() + 5
    left = processes_in(pid_namespace)
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = processes_in(pid_namespace)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


class Sandbox:
    """One episode's sandbox: a bwrap holding the namespaces; `command()` gives the argv that runs a
    command inside as uid 65534; `close()` kills every process of it."""

    def __init__(self, workspace: Path | str) -> None:
        check_available()
        self.workspace = Path(workspace)
        read, write = os.pipe()
        argv = [*bwrap_args(self.workspace), "--info-fd", str(write), "--", _tool("sleep"), "infinity"]
        try:
            self.monitor = subprocess.Popen(
                argv,
                pass_fds=(write,),
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        finally:
            os.close(write)
        info = _read_info(read)
        if "child-pid" not in info:
            err = self.monitor.stderr.read().decode(errors="replace").strip() if self.monitor.stderr else ""
            self.monitor.kill()
            self.monitor.wait()
            raise SandboxUnavailable(f"bwrap did not start the sandbox: {err or 'no info'}")
        self.pid_namespace: int = info["pid-namespace"]
        self.holder = self._holder(info["child-pid"])
        self.closed = False

    def _holder(self, init_pid: int) -> int:
        """The holder (`sleep infinity`, the init's child): its root is the sandbox's root."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for pid in processes_in(self.pid_namespace):
                stat = _stat(pid)
                if stat is not None and stat[1] == init_pid:
                    return pid
            time.sleep(0.005)
        self.close()
        raise SandboxUnavailable("bwrap started but its holder process did not appear")

    def command(self, cmd: list[str], cwd: str | None = None, env: dict[str, str] | None = None) -> list[str]:
        """The host argv that runs `cmd` inside this sandbox (cwd relative to /workspace)."""
        if self.closed:
            raise SandboxUnavailable("the sandbox is closed")
        wd = cwd if cwd and cwd.startswith("/") else f"{WORKSPACE}/{cwd}" if cwd else WORKSPACE
        enter = [_tool("nsenter"), "-t", str(self.holder), "-m", "-p", "-n", "-i", "-u", "-r", "-w", "--"]
        return [*enter, *drop_args(env, cwd=wd), *cmd]

    def processes(self) -> list[int]:
        return processes_in(self.pid_namespace)

    def close(self) -> list[int]:
        """Kill the sandbox and everything in it; returns pids that needed killing after the init died."""
        if getattr(self, "closed", True):
            return []
        self.closed = True
        return _kill_namespace(self.monitor, self.pid_namespace)


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: bytes
    stderr: bytes
    limit: str | None  # "wall time", "output", or None; CPU and memory show as a signal exit status
    seconds: float


def run_once(
    cmd: list[str],
    workspace: Path,
    *,
    input: bytes = b"",
    writable: bool = False,
    wall_s: float = 30.0,
    cpu_s: int = 10,
    memory_bytes: int = 1024 * 1024 * 1024,
    output_bytes: int = 1024 * 1024,
    nproc: int = 64,
    env: dict[str, str] | None = None,
) -> Completed:
    """Run `cmd` in a fresh sandbox over `workspace` (read-only unless `writable`), with limits. At the
    wall-clock or output limit the whole sandbox is killed; no process of it outlives this call."""
    check_available()
    read, write = os.pipe()
    argv = [*bwrap_args(workspace, writable=writable), "--info-fd", str(write), "--", *drop_args(env), *cmd]
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(
            argv,
            pass_fds=(write,),
            start_new_session=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=limits_preexec(cpu_s, memory_bytes, nproc, file_bytes=64 * 1024 * 1024),
        )
    finally:
        os.close(write)
    info = _read_info(read)
    pid_namespace = info.get("pid-namespace")
    out, err = bytearray(), bytearray()
    over = threading.Event()

    def pump(stream, buf: bytearray, cap: int) -> None:
        while chunk := stream.read1(65536):
            if len(buf) + len(chunk) > cap:
                buf.extend(chunk[: cap - len(buf)])
                over.set()
                break
            buf.extend(chunk)
        stream.close()

    pumps = [
        threading.Thread(target=pump, args=(proc.stdout, out, output_bytes), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, err, output_bytes), daemon=True),
    ]
    for t in pumps:
        t.start()

    def feed() -> None:  # in a thread: a child that never reads its input must not block us
        try:
            proc.stdin.write(input)
            proc.stdin.close()
        except (BrokenPipeError, ValueError, OSError):
            pass

    pumps.append(threading.Thread(target=feed, daemon=True))
    pumps[-1].start()
    limit = None
    deadline = time.monotonic() + wall_s
    while proc.poll() is None:
        if over.is_set():
            limit = "output"
            break
        if time.monotonic() > deadline:
            limit = "wall time"
            break
        time.sleep(0.01)
    _kill_namespace(proc, pid_namespace)
    for t in pumps:
        t.join(5)
    if limit is None and over.is_set():
        limit = "output"
    return Completed(proc.returncode, bytes(out), bytes(err), limit, time.perf_counter() - started)
