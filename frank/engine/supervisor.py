"""A tiny parent for the vLLM server, so that its exit status is never lost.

The controller starts `python -m frank.engine.supervisor SPEC.json` in a new session: the supervisor is the
leader of the engine's process group, survives the console and an SSH drop (no controlling terminal),
records its own pid (before anything is spawned), starts the server with its output appended to the log
file, records the server's pid, and when the server ends writes its exit code or signal to the exit file
(a server that cannot be spawned at all: the reason, as `spawn_error`). Then it SIGKILLs what is left of its own group
(engine-core children, itself included), so a dead server never leaves orphans behind.

Standard library only: it must start in a few milliseconds under any python.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from frank.engine import records
from frank.engine.records import ExitRecord, RunRecord, SupervisorSpec


def _default_signals() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def main(spec_path: str) -> int:
    spec = records.read(spec_path, SupervisorSpec)
    if spec is None:
        print(f"frank.engine.supervisor: {spec_path}: not a launch spec", file=sys.stderr)
        return 2
    # SIGTERM reaches the whole group: the server shuts down on it and we wait for that to finish.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    env = dict(os.environ)
    env.update(spec.env)
    log_fd = os.open(spec.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    # Our pid before anything is spawned: a status sees this supervisor even while the server starts.
    records.write(spec.run_path, RunRecord(os.getpid(), None, time.time()))
    os.write(log_fd, f"[frank] {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(spec.argv)}\n".encode())
    try:
        server = subprocess.Popen(
            spec.argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            close_fds=True,
            preexec_fn=_default_signals,  # ignored signals survive exec: the server must die on SIGTERM
        )
    except (OSError, ValueError, subprocess.SubprocessError) as exc:  # not spawned: say so, not "killed"
        reason = f"{exc.strerror or exc}: {spec.argv[0]}" if isinstance(exc, OSError) else str(exc)
        os.write(
            log_fd, f"[frank] {time.strftime('%Y-%m-%d %H:%M:%S')} could not spawn the server: {reason}\n".encode()
        )
        os.close(log_fd)
        stopped = os.path.exists(spec.stop_marker)
        records.write(spec.exit_path, ExitRecord(spawn_error=reason, ended_at=time.time(), stop_requested=stopped))
        return 0
    records.write(spec.run_path, RunRecord(os.getpid(), server.pid, time.time()))
    code = server.wait()
    ended = time.time()
    outcome = ExitRecord(
        returncode=code,
        signal=signal.Signals(-code).name if code < 0 else None,
        ended_at=ended,
        stop_requested=os.path.exists(spec.stop_marker),
    )
    os.write(log_fd, f"[frank] {time.strftime('%Y-%m-%d %H:%M:%S')} server exited: {outcome.describe()}\n".encode())
    os.close(log_fd)
    records.write(spec.exit_path, outcome)
    os.killpg(os.getpgid(0), signal.SIGKILL)  # leftovers of the group, and ourselves
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
