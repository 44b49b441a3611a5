"""A small tmpfs to fill up under a writer (CI runs as root; elsewhere the test is skipped, saying why)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(mount: Path, size: str) -> Iterator[Path]:
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here ({done.stderr.decode().strip()}); CI runs as root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(disk: Path) -> Path:
    """Fill the disk to its last bytes; deleting the file it returns frees them."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, b"\0" * 65536):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler
