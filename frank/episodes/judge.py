"""What every grader uses to judge a finished workspace without trusting anything in it.

- Files the agent left are read as data only: no symbolic link (anywhere on the path), regular files
  only, a size cap, strict UTF-8, strict JSON (no NaN or Infinity, a nesting cap). Anything else is a
  `Fail` with the reason.
- The agent's code never runs in the grader's process: `probe` runs a small program of the grader's in a
  fresh sandbox over the workspace (read-only, `python -I`, own session, CPU, memory, process and output
  limits, the whole sandbox killed at the wall-clock limit). The probe imports the agent's code and sends
  back plain JSON data on a channel of its own (the agent's prints go to stderr); the grader parses it and
  compares type and value (`same`).
- `grade(fn)` runs a grader: a `Fail` prints a fail verdict with its reason; any other exception is the
  grader's own fault, a traceback and exit status 1 (the episode's `error`).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from frank.episodes import sandbox

MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_DEPTH = 64


class Fail(Exception):
    """The workspace does not do the task; the message says why."""


def read_bytes(rel: str, limit: int = MAX_FILE_BYTES, root: Path | None = None) -> bytes:
    """A regular file of the workspace, reached without following any symbolic link."""
    base = os.path.realpath(root or os.getcwd())
    path = os.path.normpath(os.path.join(base, rel))
    if not path.startswith(base + os.sep):
        raise Fail(f"{rel}: outside the workspace")
    parts = os.path.relpath(path, base).split(os.sep)
    for k in range(1, len(parts) + 1):
        here = os.path.join(base, *parts[:k])
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            raise Fail(f"no {rel}") from None
        if stat.S_ISLNK(mode):
            link = os.path.join(*parts[:k])
            raise Fail(f"{rel} is a symbolic link" if k == len(parts) else f"{rel}: {link} is a symbolic link")
    if not stat.S_ISREG(mode):
        raise Fail(f"{rel}: not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if os.fstat(fd).st_size > limit:
            raise Fail(f"{rel}: larger than {limit} bytes")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit + 1)
    finally:
        os.close(fd)


def read_text(rel: str, limit: int = MAX_FILE_BYTES, root: Path | None = None) -> str:
    data = read_bytes(rel, limit, root)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Fail(f"{rel}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth, without recursion (a hostile document may nest thousands deep)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def parse_json(text: str, what: str) -> Any:
    """Strict JSON: standard constants only, at most MAX_DEPTH levels."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise Fail(f"{what}: nested too deeply") from None
    except ValueError as exc:
        raise Fail(f"{what}: not JSON ({exc})") from None
    if _depth(value) > MAX_DEPTH:
        raise Fail(f"{what}: nested deeper than {MAX_DEPTH} levels")
    return value


def read_json(rel: str, limit: int = MAX_FILE_BYTES) -> Any:
    return parse_json(read_text(rel, limit), rel)


def cases(result: Any, key: str, count: int) -> list[Any]:
    """`result[key]`, which must be a list of `count` results (the probe's answer for each case)."""
    got = result.get(key) if isinstance(result, dict) else None
    if not isinstance(got, list) or len(got) != count:
        raise Fail(f"the probe's result has no {count} results for {key}")
    return got


def same(got: Any, want: Any) -> bool:
    """Equal in type and value, all the way down (True is not 1, 1.0 is not 1)."""
    if type(got) is not type(want):
        return False
    if isinstance(want, dict):
        return got.keys() == want.keys() and all(same(got[k], want[k]) for k in want)
    if isinstance(want, list):
        return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    return got == want


# The probe's prelude, run by `python -I` inside the sandbox: read the input, keep a private channel for
# the result, send everything the agent's code prints to stderr, and leave through os._exit so that no
# atexit hook or finalizer of the agent's runs after the result.
PRELUDE = r"""
import json as _json, os as _os, sys as _sys
_INPUT = _json.loads(_sys.stdin.buffer.read() or b"null")
_RESULT_FD = _os.dup(1)
_os.dup2(2, 1)
_isinstance, _type = isinstance, type
_sys.pycache_prefix = "/tmp/pycache"  # the source the grader sees is what runs, never a planted .pyc


def _emit(result):
    data = _json.dumps(result, allow_nan=False).encode()
    while data:
        data = data[_os.write(_RESULT_FD, data):]
    _os._exit(0)


def _plain(value):
    try:
        _json.dumps(value, allow_nan=False)
        return {"value": value}
    except Exception as exc:
        return {"unserializable": _type(value).__name__, "why": _type(exc).__name__}


def _call(fn, *args):
    try:
        return _plain(fn(*args))
    except BaseException as exc:
        return {"raised": _type(exc).__name__, "value_error": _isinstance(exc, ValueError)}


"""


def probe(
    source: str,
    inputs: Any,
    *,
    paths: tuple[str, ...] = (sandbox.WORKSPACE,),
    wall_s: float = 30.0,
    cpu_s: int = 10,
    workspace: Path | None = None,
) -> Any:
    """Run the grader's probe `source` (after PRELUDE; it ends with `_emit(result)`) in a sandbox over the
    workspace; `paths` go on the END of sys.path, after the standard library, so the workspace cannot
    stand in for a standard module. Returns the probe's result, parsed strictly; any misbehaviour of
    the agent's code (a crash, a hang, junk on the channel, no result) is a `Fail`."""
    code = PRELUDE + f"_sys.path.extend({list(paths)!r})\n" + source
    done = sandbox.run_once(
        [str(sandbox.interpreter()), "-I", "-B", "-c", code],
        Path(workspace or os.getcwd()),
        input=json.dumps(inputs).encode(),
        wall_s=wall_s,
        cpu_s=cpu_s,
    )
    tail = done.stderr.decode("utf-8", errors="replace").strip().splitlines()[-1:] or ["no output"]
    if done.limit:
        raise Fail(f"the code ran past the {done.limit} limit ({wall_s:g} s wall, {cpu_s} s CPU, 1 MiB output)")
    if done.returncode in (128 + signal.SIGXCPU, -signal.SIGXCPU):
        raise Fail(f"the code ran past the CPU time limit ({cpu_s} s)")
    if done.returncode != 0:
        raise Fail(f"the code exited with status {done.returncode}: {tail[0][:200]}")
    try:
        text = done.stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise Fail("the probe's result is not UTF-8 (the code wrote on its channel)") from None
    if not text:
        raise Fail(f"the code gave no result: {tail[0][:200]}")
    return parse_json(text, "the probe's result")


def verdict(ok: bool, detail: str) -> None:
    print(json.dumps({"pass": bool(ok), "detail": detail[:500]}))


def grade(fn: Callable[[dict[str, Any] | None], str]) -> None:
    """Run a grader: `fn(expected)` returns the pass detail or raises `Fail`. The hidden answer is the one
    argument (absent for a fixture task without one); the working directory is the workspace."""
    expected = json.loads(Path(sys.argv[1]).read_text()) if len(sys.argv) > 1 else None
    try:
        detail = fn(expected)
    except Fail as fail:
        verdict(False, str(fail))
        return
    verdict(True, detail)
