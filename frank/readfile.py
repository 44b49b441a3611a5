"""The one reader of every file frank reads: bounded, and honest about what it was given.

- Only a regular file is read (a symlink to one is fine). A device (/dev/zero), a FIFO, a socket or a
  directory is refused naming the path and what it is; a FIFO is opened without waiting for a writer.
- Each kind of file has a size limit (`Kind`), checked before reading and again while reading (a file that
  grows under the reader): a bigger file is refused with its size and the limit, never read into memory.
- Text is UTF-8: anything else is refused at the line and byte where decoding failed.
- JSON is refused at its line and column; NaN and Infinity, which Python's json takes and JSON does not,
  are refused too. `json_lines` gives the line of any field of a JSON text, for errors that point into it.

Every refusal is the caller's error type (a FrankError), so a CLI prints it and exits 1. The few readers of
files frank does not take from a user (/proc, its own logs followed as they grow, the sandbox's own reads)
are listed with their reason in tests/unit/test_bounded_reader.py.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frank.errors import FrankError

Err = Callable[[str], FrankError]


class ReadError(FrankError):
    """A file refused by this reader (the default error): its path, line (0: the file as a whole) and reason
    apart too, for the checkers that list every problem of a folder."""

    def __init__(self, message: str, path: str = "", line: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.path, self.line, self.reason = path, line, reason or message


def _refuse(error: Err, where: Path | str, reason: str, line: int = 0) -> FrankError:
    message = f"{where}:{line}: {reason}" if line else f"{where}: {reason}"
    if error is ReadError:
        return ReadError(message, str(where), line, reason)
    return error(message)


@dataclass(frozen=True)
class Kind:
    what: str  # in messages: "a TOML file is at most 4 MiB"
    limit: int  # bytes


MiB = 1 << 20
TOML = Kind("a TOML file", 4 * MiB)  # profiles, designs, screens, suites, campaign, fleet, console: a few KB
JSON = Kind("a JSON record", 32 * MiB)  # run.json, screen records, fidelity runs and tables, state files
CSV = Kind("a results CSV", 16 * MiB)  # a start a row: a few KB for 100 blocks
JSONL = Kind("a record file", 1024 * MiB)  # journals, replay results, workload draws (whole prompts)
TEXT = Kind("a text file", 4 * MiB)  # instructions, tokens, a model's small config


def _size(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n} bytes"


_NOT_REGULAR = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def read_bytes(path: Path | str, kind: Kind, error: Err = ReadError) -> bytes:
    """The bytes of a regular file of at most `kind.limit` bytes, or `error` naming the path."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise _refuse(error, path, "no such file") from None
    except OSError as exc:
        raise _refuse(error, path, f"cannot read: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd)
        for test, what in _NOT_REGULAR:
            if test(mode.st_mode):
                raise _refuse(error, path, f"is {what}, not a regular file")
        if mode.st_size > kind.limit:
            raise _refuse(error, path, f"is {_size(mode.st_size)}; {kind.what} is at most {_size(kind.limit)}")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, kind.limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > kind.limit:
                raise _refuse(error, path, f"grew past {_size(kind.limit)} while read; {kind.what} is at most that")
        return b"".join(chunks)
    except OSError as exc:
        raise _refuse(error, path, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_bytes_if(path: Path | str, kind: Kind, error: Err = ReadError) -> bytes | None:
    """As `read_bytes`, None when there is no file (a record not written yet)."""
    if not os.path.lexists(path):
        return None
    return read_bytes(path, kind, error)


def decode(data: bytes, where: Path | str, error: Err = ReadError, first_line: int = 1) -> str:
    """UTF-8 text, or `error` at the line and byte where decoding failed."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + data.count(b"\n", 0, exc.start)
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        reason = (
            f"not UTF-8 text: byte {column} of the line (byte {exc.start + 1} of the file) "
            f"is 0x{data[exc.start]:02x} ({exc.reason})"
        )
        raise _refuse(error, where, reason, line) from None


def read_text(path: Path | str, kind: Kind, error: Err = ReadError) -> str:
    return decode(read_bytes(path, kind, error), path, error)


class _Constant(str):
    """NaN, Infinity or -Infinity where a JSON text has one (Python's json takes them; JSON does not)."""


def loads(text: str, where: Path | str, error: Err = ReadError) -> Any:
    """JSON data, or `error` at the line (and field) where it is not JSON: NaN and Infinity included."""
    try:
        data = json.loads(text, parse_constant=_Constant)
    except json.JSONDecodeError as exc:
        raise _refuse(error, where, f"not JSON: {exc.msg} (column {exc.colno})", exc.lineno) from None
    except RecursionError:
        raise _refuse(error, where, "not JSON frank reads: nested too deep") from None
    found = _first_constant(data, ())
    if found is not None:
        path, name = found
        field = f"{field_name(path)}: " if path else ""
        raise _refuse(error, where, f"{field}{name} is not a JSON number", json_line(json_lines(text), path))
    return data


def _first_constant(data: Any, path: JsonPath) -> tuple[JsonPath, str] | None:
    if isinstance(data, _Constant):
        return path, str(data)
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        found = _first_constant(value, (*path, key))
        if found is not None:
            return found
    return None


def read_json(path: Path | str, kind: Kind = JSON, error: Err = ReadError) -> Any:
    return loads(read_text(path, kind, error), path, error)


def read_object(path: Path | str, kind: Kind = JSON, error: Err = ReadError) -> dict[str, Any]:
    """A JSON file that holds one object (every record and state file of frank)."""
    data = read_json(path, kind, error)
    if not isinstance(data, dict):
        raise _refuse(error, path, f"expected a JSON object, got a JSON {type(data).__name__}", 1)
    return data


# -- where a field is ---------------------------------------------------------------------------------

JsonPath = tuple[str | int, ...]


def field_name(path: JsonPath) -> str:
    """('parts', 1, 'evidence', 0, 'state') -> 'parts[1].evidence[0].state' (a TOML or JSON field)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else f'"{part}"'
            out += f".{text}" if out else text
    return out


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def json_lines(text: str) -> dict[JsonPath, int]:
    """The line of every field of a JSON text that `loads` took: ('cells', 3, 'value') -> the line where
    that value starts. Empty when the text is not JSON (the caller refused it already)."""
    out: dict[JsonPath, int] = {}

    def value(at: int, path: JsonPath) -> int:
        at = _SPACE.match(text, at).end()  # type: ignore[union-attr]  # the pattern matches the empty string
        out[path] = text.count("\n", 0, at) + 1
        opener = text[at : at + 1]
        if opener not in ("{", "["):
            return _DECODER.raw_decode(text, at)[1]
        closer, at, i = ("}" if opener == "{" else "]"), at + 1, 0
        while True:
            at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
            if text[at] == closer:
                return at + 1
            if opener == "{":
                key, at = _DECODER.raw_decode(text, at)
                at = _SPACE.match(text, at).end() + 1  # type: ignore[union-attr]  # past the colon
                at = value(at, (*path, key))
            else:
                at = value(at, (*path, i))
                i += 1
            at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
            if text[at] == ",":
                at += 1

    try:
        value(0, ())
    except (ValueError, IndexError, RecursionError):
        return {}
    return out


def json_line(lines: dict[JsonPath, int], path: JsonPath) -> int:
    """The line of the field, else of its nearest enclosing one; 0 when none is known."""
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return lines.get((), 0)
