"""Append-only JSON Lines record files: one JSON object a line, appended whole and fsynced, read back whole.

Every record file frank keeps (the experiment journal, replay results, episode results and events, the
campaign history, the engine's knob changes) is written by `append` and read by `read` or `parse`:

- A line is a record only once its newline is written. The bytes after the last newline are a torn last
  line (a writer killed mid-write) or a record still being written: readers skip them.
- Any other line that is not a JSON object (bad JSON, bad UTF-8, an array) is damage, not a crash: an
  error naming file:line, so nothing is silently dropped. Blank lines carry no record and are skipped.
- `append` moves a torn tail aside to `NAME.torn` (kept, never dropped) before it writes, so a record
  never lands glued to the end of a torn one. It holds an exclusive flock on the file meanwhile, so two
  writers never interleave and none mistakes another's write in flight for a torn tail.
- On a full disk (ENOSPC, EDQUOT) or any other failed write, `append` cuts the file back to where it was
  and raises naming the file: a record is appended whole or not at all, every line before it stays, and
  the writer resumes once there is space again.

Checked input formats (workload draws, fidelity text sets) collect every error instead: see
frank.workloads.format.iter_jsonl.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from frank import readfile
from frank.errors import FrankError, WriteError


class JsonlError(FrankError):
    pass


def parse(data: bytes, where: Path | str, first_line: int = 1) -> tuple[list[dict[str, Any]], int]:
    """The records in `data` (a file's bytes from the start of line `first_line` on) and how many bytes its
    whole lines take; the rest is a torn or unfinished last line."""
    end = data.rfind(b"\n") + 1
    records: list[dict[str, Any]] = []
    start = 0
    number = first_line
    while start < end:
        stop = data.index(b"\n", start)
        raw = data[start:stop]
        if raw.strip():
            try:
                value = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise JsonlError(f"{where}:{number}: damaged line ({_reason(exc)})") from None
            if not isinstance(value, dict):
                raise JsonlError(f"{where}:{number}: damaged line (JSON {type(value).__name__}, not an object)")
            records.append(value)
        start = stop + 1
        number += 1
    return records, end


def read(path: Path) -> list[dict[str, Any]]:
    """Every whole record of the file ([] when there is no file)."""
    data = readfile.read_bytes_if(path, readfile.JSONL, JsonlError)  # a regular file, bounded
    return [] if data is None else parse(data, path)[0]


def append(path: Path, record: Mapping[str, Any], **dumps: Any) -> None:
    """Append one record as one line (json.dumps with `dumps`; default=str unless given) and fsync it. The
    file is created readable by the user only."""
    dumps.setdefault("default", str)
    line = (json.dumps(record, **dumps) + "\n").encode()
    if line.count(b"\n") != 1:
        raise ValueError("a record must encode on one line (indent is not allowed)")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        write_whole(fd, path, line, _heal(fd, path))
    finally:
        os.close(fd)  # also drops the lock


def write_whole(fd: int, path: Path, line: bytes, size: int) -> None:
    """Write one line at the end of a file that is `size` bytes long (opened O_APPEND) and fsync it, whole or
    not at all: a short or failed write (a full disk) is cut back to `size` and raised naming the file."""
    try:
        written = os.write(fd, line)  # one write: a kill leaves at most a prefix of this line
        if written != len(line):  # a short write: the disk filled up under it
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        os.fsync(fd)
    except OSError as exc:
        os.ftruncate(fd, size)  # the part written goes: the file ends at its last whole record
        raise WriteError(
            f"{path}: cannot append a record: {exc.strerror or exc} (the records before it are kept)"
        ) from None


def torn_path(path: Path) -> Path:
    """Where `append` keeps a torn tail: `journal.jsonl` -> `journal.torn`."""
    return path.with_suffix(".torn")


def heal(path: Path) -> int:
    """Move a torn tail aside now (as `append` does first); returns the file's length after."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return _heal(fd, path)
    finally:
        os.close(fd)


def _heal(fd: int, path: Path) -> int:
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    # the tail is at most one line long: read back until its start
    chunk, good = 1 << 16, 0
    pos = size
    while pos > 0:
        pos = max(0, pos - chunk)
        found = os.pread(fd, size - pos, pos).rfind(b"\n")
        if found >= 0:
            good = pos + found + 1
            break
    torn = os.pread(fd, size - good, good)
    keep = os.open(torn_path(path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        note = {"t": time.time(), "file": path.name, "offset": good, "bytes": torn.decode(errors="replace")}
        os.write(keep, (json.dumps(note) + "\n").encode())
        os.fsync(keep)
    finally:
        os.close(keep)
    os.ftruncate(fd, good)
    os.fsync(fd)
    return good


def _reason(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"bad JSON: {exc.msg} at column {exc.colno}"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text: byte {exc.start + 1} of the line is 0x{exc.object[exc.start]:02x} ({exc.reason})"
    return str(exc)
