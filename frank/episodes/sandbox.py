"""The episodes' sandbox: bubblewrap namespaces in which the agent's tools and the agent's code run.

Inside, a process sees a read-only system (/usr and the /etc pieces programs need), a stdlib-only Python
(the interpreter frank runs on, its site-packages hidden), a private /tmp and /var/tmp, /dev and /proc of
its own, and the workspace at /workspace: a tmpfs of the sandbox's own holding a copy of it (so no host
path shows in /proc/self/mountinfo), copied in when the sandbox starts and, for a sandbox that `keep`s
its work, copied back out (bytecode left out) when it closes. Nothing of the project, the run folder, the
hidden answers, the graders, other draws or other runs is mounted. It runs as uid/gid 65534 with no
capabilities and no_new_privs, in its own mount, PID, network (loopback only), IPC and UTS namespaces, under
a seccomp filter that refuses the kernel's keyring and BPF syscalls: the kernel objects that outlive a
process and that every sandbox of one uid would otherwise share (a key stashed in one sandbox is
readable in the next). Every process is started with the sandbox's own environment, so the launcher's
environment is never in the sandbox's /proc.

Two shapes, one mechanism:
- `Sandbox`: a bwrap holds the namespaces (so a server a tool starts, like inspect's text-editor helper,
  lives between tool calls); each command enters them with nsenter and drops to uid 65534, with the
  limits of `COMMAND_LIMITS`. `close()` kills the holder: the namespace's init dies, and the kernel kills
  every process left in the PID namespace; `close()` then checks that none is left.
- `run_once`: one command in a fresh `Sandbox`, started exactly as an agent's tool call is (same env,
  limits, process tree), with wall-clock, CPU-time and output limits enforced from outside, so the code
  cannot tell a judged run from an agent's own run by looking at itself.

bwrap runs as root here (it needs no user namespace then, and binds paths only root can traverse); the
sandboxed processes are dropped to 65534 by setpriv. Standard library only: the agent venv imports it.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import platform
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

log = logging.getLogger(__name__)

UID = GID = 65534
WORKSPACE = "/workspace"
PATH = "/usr/local/bin:/usr/bin:/bin"
TMPFS_BYTES = 512 * 1024 * 1024  # each of /tmp and /var/tmp: tmpfs lives in RAM
WORKSPACE_BYTES = 1024 * 1024 * 1024  # the workspace's tmpfs
# every command in a sandbox, an agent's tool call or a judged run alike: the same limits, so that a
# judged run cannot be told apart by its limits (a judged run's CPU time is limited from outside)
COMMAND_LIMITS = {"memory_bytes": 4 * 1024 * 1024 * 1024, "nproc": 512, "file_bytes": 256 * 1024 * 1024}
MAX_COPY_DEPTH = 128
MAX_COPY_ENTRIES = 100_000
BYTECODE_SUFFIXES = (".pyc", ".pyo")
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


# -- the seccomp filter: keyrings and BPF refused ---------------------------------------------------------

ENOSYS = 38
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_X32_BIT = 0x40000000
# per audit arch: add_key, request_key, keyctl, bpf
DENIED_SYSCALLS = {
    0xC000003E: (248, 249, 250, 321),  # x86_64 (x32 numbers, with bit 30, are all refused)
    0x40000003: (286, 287, 288, 357),  # i386, which an x86_64 process can reach through int 0x80
    0xC00000B7: (217, 218, 219, 280),  # aarch64
}


def seccomp_program() -> bytes:
    """A classic BPF seccomp program: the syscalls of DENIED_SYSCALLS fail with ENOSYS, an unknown
    architecture's syscalls all fail, everything else is allowed."""

    def ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
        return struct.pack("=HBBI", code, jt, jf, k)

    out = [ins(_LD_ABS, 4)]  # seccomp_data.arch
    for arch, numbers in DENIED_SYSCALLS.items():
        block = [ins(_LD_ABS, 0)]  # seccomp_data.nr
        checks = ([(_JGE, _X32_BIT)] if arch == 0xC000003E else []) + [(_JEQ, n) for n in numbers]
        for k, (code, nr) in enumerate(checks):
            block.append(ins(code, nr, jt=len(checks) - k, jf=0))  # to the ERRNO after the ALLOW
        block += [ins(_RET, _RET_ALLOW), ins(_RET, _RET_ERRNO | ENOSYS)]
        out.append(ins(_JEQ, arch, jt=0, jf=len(block)))
        out += block
    out.append(ins(_RET, _RET_ERRNO | ENOSYS))
    return b"".join(out)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_FILTER = ctypes.create_string_buffer(seccomp_program())
_FPROG = _SockFprog(len(_FILTER.raw) // 8, ctypes.addressof(_FILTER))
_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def install_seccomp() -> None:
    """Install the filter on this process (inherited by everything it execs and forks; never removed)."""
    if platform.machine() not in ("x86_64", "aarch64"):
        raise OSError(f"no seccomp filter for {platform.machine()}")
    if _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if _LIBC.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(_FPROG), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def limits_preexec(
    cpu_s: int | None = None, memory_bytes: int | None = None, nproc: int = 256, file_bytes: int | None = None
) -> Callable[[], None]:
    """Resource limits and the seccomp filter, set in the child before it execs bwrap/nsenter; every
    sandboxed process inherits them."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        if cpu_s is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        if memory_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        if file_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
        install_seccomp()

    return apply


# -- the layout ---------------------------------------------------------------------------------------------


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


def bwrap_args() -> list[str]:
    """bwrap's argv up to (not including) the command: the layout above, an empty tmpfs at /workspace.
    It names no host path of the workspace (the copy goes in through the holder's root)."""
    args = [_tool("bwrap"), *_system_args()]
    args += ["--dev", "/dev", "--proc", "/proc"]
    for tmp in ("/tmp", "/var/tmp"):
        args += ["--perms", "1777", "--size", str(TMPFS_BYTES), "--tmpfs", tmp]
    args += ["--perms", "0755", "--size", str(WORKSPACE_BYTES), "--tmpfs", WORKSPACE]
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


def spawn_options() -> dict[str, Any]:
    """How every host process that starts or enters a sandbox is spawned (subprocess or asyncio): with the
    sandbox's own environment (the launcher's never reaches the sandbox's /proc), in its own session,
    under COMMAND_LIMITS and the seccomp filter."""
    return {"env": base_env(), "start_new_session": True, "preexec_fn": limits_preexec(**COMMAND_LIMITS)}


def prepare_workspace(workspace: Path) -> None:
    """Hand the workspace to the sandbox user (frank, as root, created it)."""
    root = Path(workspace)
    os.chown(root, UID, GID, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), UID, GID, follow_symlinks=False)


# -- copying a workspace in and out, never following a link ------------------------------------------------


def is_bytecode(name: str, is_dir: bool) -> bool:
    return name == "__pycache__" if is_dir else name.endswith(BYTECODE_SUFFIXES)


def copy_tree(src_fd: int, dst_fd: int, *, skip_bytecode: bool, owner: tuple[int, int] | None) -> int:
    """Copy the directory open at `src_fd` into the (empty) directory open at `dst_fd`, reached through
    file descriptors only and never through a symbolic link: directories, regular files, symbolic links
    (as links) and named pipes (as new pipes); sockets and devices are left out, and so is bytecode when
    `skip_bytecode`. Returns the number of entries copied."""
    count = 0

    def walk(src: int, dst: int, depth: int) -> None:
        nonlocal count
        if depth > MAX_COPY_DEPTH:
            log.warning("workspace copy: deeper than %d levels, the rest left out", MAX_COPY_DEPTH)
            return
        for entry in sorted(os.scandir(src), key=lambda e: e.name):
            if count >= MAX_COPY_ENTRIES:
                log.warning("workspace copy: more than %d entries, the rest left out", MAX_COPY_ENTRIES)
                return
            st = entry.stat(follow_symlinks=False)
            name = entry.name
            if is_bytecode(name, stat.S_ISDIR(st.st_mode)) and skip_bytecode:
                continue
            if stat.S_ISDIR(st.st_mode):
                os.mkdir(name, 0o700, dir_fd=dst)
                sub_src = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=src)
                sub_dst = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dst)
                try:
                    walk(sub_src, sub_dst, depth + 1)
                finally:
                    os.close(sub_src)
                    os.close(sub_dst)
            elif stat.S_ISREG(st.st_mode):
                _copy_file(name, src, dst)
            elif stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
            elif stat.S_ISFIFO(st.st_mode):
                os.mkfifo(name, 0o600, dir_fd=dst)
            else:
                continue
            count += 1
            if owner is not None:
                os.chown(name, *owner, dir_fd=dst, follow_symlinks=False)
            if not stat.S_ISLNK(st.st_mode):
                os.chmod(name, stat.S_IMODE(st.st_mode) & 0o1777, dir_fd=dst)  # not a link: made just now
            os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=dst, follow_symlinks=False)

    walk(src_fd, dst_fd, 0)
    return count


def _copy_file(name: str, src: int, dst: int) -> None:
    rfd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=src)
    try:
        if not stat.S_ISREG(os.fstat(rfd).st_mode):
            return
        wfd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dst)
        try:
            while os.sendfile(wfd, rfd, None, 1 << 24) > 0:
                pass
        finally:
            os.close(wfd)
    finally:
        os.close(rfd)


def _open_dir(path: str | Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY)


# -- processes of a sandbox -----------------------------------------------------------------------------------


class BwrapInfo(TypedDict, total=False):
    """What bwrap writes to --info-fd: the sandbox's first process, as the host sees it."""

    child_pid: int
    pid_namespace: int


def _read_info(fd: int) -> BwrapInfo:
    buf = b""
    while chunk := os.read(fd, 65536):
        buf += chunk
    os.close(fd)
    info = json.loads(buf) if buf.strip() else {}
    out = BwrapInfo()
    if "child-pid" in info:
        out["child_pid"] = int(info["child-pid"])
    if "pid-namespace" in info:
        out["pid_namespace"] = int(info["pid-namespace"])
    return out


def _ns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (the state is the first)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) from /proc/PID/stat."""
    fields = _stat_fields(pid)
    try:
        return (fields[0], int(fields[1])) if fields else None
    except (IndexError, ValueError):
        return None


def processes_in(pid_namespace: int) -> list[int]:
    """Host pids of the live processes in a PID namespace (by its inode, from bwrap's --info-fd); zombies,
    already dead and waiting for their parent to reap them, are not counted."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _ns_inode(int(entry)) == pid_namespace:
            stat_ = _stat(int(entry))
            if stat_ is not None and stat_[0] != "Z":
                found.append(int(entry))
    return found


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """CPU time of these processes and of the children they have reaped (user and system)."""
    total = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields and len(fields) > 14:
            total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return total / _TICK


def _kill_namespace(monitor: subprocess.Popen[bytes], pid_namespace: int | None) -> list[int]:
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
    """A sandbox over a copy of `workspace`: a bwrap holding the namespaces; `command()` gives the argv
    that runs a command inside as uid 65534 (spawn it with `spawn_options()`); `close()` kills every
    process of it and, if `keep`, first replaces the host workspace's contents with the sandbox's
    (bytecode left out: the sources are what is judged and what runs next; `keep_bytecode` keeps it too, for
    an adversarial attempt that ships a workspace as anyone could hand one to the grader)."""

    def __init__(self, workspace: Path | str, *, keep: bool = True, keep_bytecode: bool = False) -> None:
        check_available()
        self.workspace = Path(workspace)
        self.keep = keep
        self.keep_bytecode = keep_bytecode
        self.closed = True
        read, write = os.pipe()
        argv = [*bwrap_args(), "--info-fd", str(write), "--", _tool("sleep"), "infinity"]
        options = {**spawn_options(), "preexec_fn": install_seccomp}  # bwrap itself: the filter, no limits
        try:
            self.monitor = subprocess.Popen(
                argv,
                pass_fds=(write,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                **options,
            )
        finally:
            os.close(write)
        info = _read_info(read)
        if "child_pid" not in info:
            err = self.monitor.stderr.read().decode(errors="replace").strip() if self.monitor.stderr else ""
            self.monitor.kill()
            self.monitor.wait()
            raise SandboxUnavailable(f"bwrap did not start the sandbox: {err or 'no info'}")
        self.pid_namespace: int = info["pid_namespace"]
        self.closed = False
        self.holder = self._holder(info["child_pid"])
        try:
            self._copy_in()
        except BaseException:
            self.close()
            raise

    def _holder(self, init_pid: int) -> int:
        """The holder (`sleep infinity`, the init's child): its root is the sandbox's root."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for pid in processes_in(self.pid_namespace):
                stat_ = _stat(pid)
                if stat_ is not None and stat_[1] == init_pid:
                    return pid
            time.sleep(0.005)
        self.close()
        raise SandboxUnavailable("bwrap started but its holder process did not appear")

    def _inside(self) -> int:
        return _open_dir(f"/proc/{self.holder}/root{WORKSPACE}")

    def _copy_in(self) -> None:
        src, dst = _open_dir(self.workspace), self._inside()
        try:
            copy_tree(src, dst, skip_bytecode=True, owner=(UID, GID))
            os.fchown(dst, UID, GID)
        finally:
            os.close(src)
            os.close(dst)

    def _copy_out(self, inside: int) -> None:
        for child in self.workspace.iterdir():  # the host copy: frank's own files, untouched since copy-in
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        dst = _open_dir(self.workspace)
        try:
            copy_tree(inside, dst, skip_bytecode=not self.keep_bytecode, owner=(UID, GID))
        finally:
            os.close(dst)

    def command(self, cmd: list[str], cwd: str | None = None, env: dict[str, str] | None = None) -> list[str]:
        """The host argv that runs `cmd` inside this sandbox (cwd relative to /workspace)."""
        if self.closed:
            raise SandboxUnavailable("the sandbox is closed")
        wd = cwd if cwd and cwd.startswith("/") else f"{WORKSPACE}/{cwd}" if cwd else WORKSPACE
        enter = [_tool("nsenter"), "-t", str(self.holder), "-m", "-p", "-n", "-i", "-u", "-r", "-w", "--"]
        return [*enter, *drop_args(env, cwd=wd), *cmd]

    def processes(self) -> list[int]:
        return processes_in(self.pid_namespace)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.processes())

    def close(self) -> list[int]:
        """Kill the sandbox and everything in it (copying its workspace out first if `keep`); returns
        pids that needed killing after the init died."""
        if getattr(self, "closed", True):
            return []
        self.closed = True
        inside = None
        if self.keep:
            try:  # an open directory keeps the tmpfs readable after every process of the sandbox is gone
                inside = self._inside()
            except OSError as exc:
                log.error("cannot reach the sandbox's workspace to keep it: %s", exc)
        left = _kill_namespace(self.monitor, self.pid_namespace)
        if inside is not None:
            try:
                self._copy_out(inside)
            finally:
                os.close(inside)
        return left


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: bytes
    stderr: bytes
    limit: str | None  # "wall time", "CPU time", "output", or None; memory shows as the code's own error
    seconds: float


def run_once(
    cmd: list[str],
    workspace: Path,
    *,
    input: bytes | None = None,
    keep: bool = False,
    keep_bytecode: bool = False,
    wall_s: float = 30.0,
    cpu_s: float | None = 10.0,
    output_bytes: int = 1024 * 1024,
    env: dict[str, str] | None = None,
) -> Completed:
    """Run `cmd` in a fresh sandbox over a copy of `workspace` (its changes copied back if `keep`), started
    as an agent's tool call is. At the wall-clock, CPU-time or output limit the whole sandbox is killed;
    no process of it outlives this call."""
    started = time.perf_counter()
    box = Sandbox(workspace, keep=keep, keep_bytecode=keep_bytecode)
    try:
        proc = subprocess.Popen(
            box.command(cmd, env=env),
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            **spawn_options(),
        )
        out, err = bytearray(), bytearray()
        over = threading.Event()

        # stream: the child's stdout/stderr, a BufferedReader (read1 returns what is there now); typeshed says IO
        def pump(stream: Any, buf: bytearray, cap: int) -> None:
            while chunk := stream.read1(65536):
                if len(buf) + len(chunk) > cap:
                    buf.extend(chunk[: cap - len(buf)])
                    over.set()
                    break
                buf.extend(chunk)
            stream.close()

        threads = [
            threading.Thread(target=pump, args=(proc.stdout, out, output_bytes), daemon=True),
            threading.Thread(target=pump, args=(proc.stderr, err, output_bytes), daemon=True),
        ]

        def feed() -> None:  # in a thread: a child that never reads its input must not block us
            try:
                assert proc.stdin is not None  # spawned with stdin=PIPE when there is input
                proc.stdin.write(input)
                proc.stdin.close()
            except (BrokenPipeError, ValueError, OSError):
                pass

        if input is not None:
            threads.append(threading.Thread(target=feed, daemon=True))
        for t in threads:
            t.start()
        limit = None
        deadline = time.monotonic() + wall_s
        next_cpu = 0.0
        while proc.poll() is None:
            if over.is_set():
                limit = "output"
                break
            now = time.monotonic()
            if now > deadline:
                limit = "wall time"
                break
            if cpu_s is not None and now >= next_cpu:
                next_cpu = now + 0.05
                if box.cpu_seconds() > cpu_s:
                    limit = "CPU time"
                    break
            time.sleep(0.01)
    finally:
        box.close()
    proc.wait()
    for t in threads:
        t.join(5)
    if limit is None and over.is_set():
        limit = "output"
    return Completed(proc.returncode, bytes(out), bytes(err), limit, time.perf_counter() - started)
