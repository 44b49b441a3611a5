"""One lock per run: an exclusive flock on the run's lock file, which the kernel drops when its holder dies."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from frank.jobs.kinds import JobError


class RunLock:
    """An exclusive flock on the run's lock file, holding the holder's pid; the kernel drops it when the
    holder dies, even by SIGKILL."""

    def __init__(self, path: Path, what: str = "run") -> None:
        self.path = path
        self.what = what
        self.fd = -1

    def acquire(self) -> RunLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise self.refused(lock_holder(self.path)) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.fsync(fd)
        self.fd = fd
        return self

    def refused(self, holder: int | None) -> Exception:
        return JobError(
            f"another process (pid {holder or '?'}) is running {self.what} {self.path.parent.name}; "
            f"follow it with `frank jobs status {self.path.parent.name}`"
        )

    def release(self) -> None:
        if self.fd >= 0:
            os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_holder(path: Path) -> int | None:
    """The pid of the live process holding the lock (-1 when unknown), or None when nobody holds it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode(errors="replace").strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
