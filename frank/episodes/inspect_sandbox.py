"""The `frank-bwrap` sandbox for inspect-ai (agent venv): inspect's own bash, python and text-editor tools
run inside the episode's bubblewrap sandbox (frank.episodes.sandbox), as uid 65534, in /workspace.

The config of the sandbox spec is the host path of the episode's workspace. sample_init starts the
episode's sandbox (a copy of the workspace on the sandbox's own tmpfs); every exec enters it (so the text
editor's helper server, which inspect injects into /var/tmp and starts once, lives between tool calls);
sample_cleanup kills it and every process in it and copies the finished workspace back for the grader.
Commands run as the sandbox's one user: asked for another (root included), exec refuses, which inspect
reads as "no usable root" and runs its helper as that user. Imports: the standard library, inspect-ai and
frank.episodes.sandbox (standard library only).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
from typing import Any, Literal, overload

from inspect_ai.util import ExecResult, OutputLimitExceededError, SandboxEnvironment, sandboxenv
from inspect_ai.util._sandbox.environment import SandboxUserUnsupportedError

from frank.episodes.sandbox import WORKSPACE, Sandbox, spawn_options

OUTPUT_BYTES = 10 * 1024 * 1024  # per stream, like inspect's own limit
SANDBOX_USERS = (None, "nobody", "65534")
EXIT_GRACE_S = 0.5  # after the command exits, output still in flight (a background child may keep the pipe)


async def _drain(stream: asyncio.StreamReader, buf: bytearray) -> None:
    while chunk := await stream.read(65536):
        buf.extend(chunk)
        if len(buf) > OUTPUT_BYTES:
            del buf[: len(buf) - OUTPUT_BYTES]  # keep the tail, as inspect allows


@sandboxenv(name="frank-bwrap")
class BwrapSandbox(SandboxEnvironment):
    def __init__(self, sandbox: Sandbox) -> None:
        super().__init__()
        self.sandbox = sandbox

    # inspect_ai's SandboxEnvironment hooks, kept untyped like inspect_ai's own signatures here (it is Any
    # in this venv; the ignores hold where inspect_ai is installed, in the agent venv)
    @classmethod
    async def sample_init(cls, task_name, config, metadata):  # type: ignore[override]
        # started from the event loop's thread: bwrap dies with the thread that started it
        return {"default": cls(Sandbox(str(config)))}

    @classmethod
    async def sample_cleanup(cls, task_name, config, environments, interrupted):  # type: ignore[override]
        for env in environments.values():
            env.as_type(BwrapSandbox).sandbox.close()

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> Any:
        return config

    async def exec(  # type: ignore[override]
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        code, out, err = await self._run(cmd, input, cwd, env, user, timeout)
        return ExecResult(
            success=code == 0,
            returncode=code,
            stdout=out.decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
        )

    async def _run(self, cmd, input, cwd, env, user, timeout) -> tuple[int, bytes, bytes]:
        if user not in SANDBOX_USERS:
            raise SandboxUserUnsupportedError(f"the frank-bwrap sandbox runs commands as nobody only, not {user!r}")
        data = input.encode() if isinstance(input, str) else input
        proc = await asyncio.create_subprocess_exec(
            *self.sandbox.command(cmd, cwd, env),
            stdin=asyncio.subprocess.PIPE if data is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            # its own process group (a timeout kills the command and its children), the sandbox's env, limits
            # and seccomp filter: exactly how a grader's judged run is started
            **spawn_options(),
        )
        out, err = bytearray(), bytearray()
        readers = [asyncio.ensure_future(_drain(proc.stdout, out)), asyncio.ensure_future(_drain(proc.stderr, err))]
        if data is not None:
            try:
                proc.stdin.write(data)
                await proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass
            proc.stdin.close()
        try:
            code = await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            _stop(proc, readers)
            raise TimeoutError(f"command ran past {timeout} s: {shlex.join(cmd)[:200]}") from None
        except asyncio.CancelledError:  # the sample was cancelled (a limit, an interrupt): the command goes too
            _stop(proc, readers)
            raise
        await asyncio.wait(readers, timeout=EXIT_GRACE_S)
        for r in readers:
            r.cancel()
        return code, bytes(out), bytes(err)

    async def write_file(self, file: str, contents: str | bytes) -> None:
        data = contents.encode() if isinstance(contents, str) else contents
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
        code, _, err = await self._run(["sh", "-c", script, "sh", self._path(file)], data, None, None, None, 120)
        if code != 0:
            _raise_for(err.decode(errors="replace"), file)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        script = 'test -d "$1" && { echo "Is a directory" >&2; exit 21; }; exec cat -- "$1"'
        code, out, err = await self._run(["sh", "-c", script, "sh", self._path(file)], None, None, None, None, 120)
        if code != 0:
            _raise_for(err.decode(errors="replace"), file)
        if len(out) >= OUTPUT_BYTES:
            raise OutputLimitExceededError(limit_str="10 MiB", truncated_output=None)
        return out.decode("utf-8") if text else out

    @staticmethod
    def _path(file: str) -> str:
        return file if file.startswith("/") else f"{WORKSPACE}/{file}"


def _stop(proc: asyncio.subprocess.Process, readers: list[asyncio.Future[Any]]) -> None:
    """Kill the command's process group (what it left in the sandbox dies with the sandbox)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for reader in readers:
        reader.cancel()


def _raise_for(stderr: str, file: str) -> None:
    if "No such file" in stderr:
        raise FileNotFoundError(file)
    if "Permission denied" in stderr or "Read-only" in stderr:
        raise PermissionError(file)
    if "Is a directory" in stderr:
        raise IsADirectoryError(file)
    raise OSError(f"{file}: {stderr.strip()[:300]}")
