"""What every grader uses to judge a finished workspace without trusting anything in it.

- Files the agent left are read as data only: no symbolic link (anywhere on the path), regular files
  only, a size cap, strict UTF-8, strict JSON (no NaN or Infinity, a nesting cap). Anything else is a
  `Fail` with the reason.
- The agent's code never runs in the grader's process, and nothing its process reports is a verdict:
  `probe` runs a small program of the grader's as a user's Python run would run it (`python3 -` through
  `bash --login -c`, no interpreter flags, the sandbox's environment, the path in the order the task's
  instructions give it) in a fresh sandbox over a copy of the workspace, its bytecode left out, with the
  limits every sandboxed command has (CPU time, wall clock and output limited from outside). The probe
  calls the agent's code on the grader's inputs and sends back plain data; the grader decides every
  outcome itself, comparing type and value (`same`) with what it holds: the tests' own expectations and
  hidden cases drawn per run. `run_as_instructed` runs the task's own command the same way.
- `grade(fn)` runs a grader: a `Fail` prints a fail verdict with its reason; any other exception is the
  grader's own fault, a traceback and exit status 1 (the episode's `error`).
"""

from __future__ import annotations

import ast
import json
import os
import secrets
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
    return bool(got == want)


def parse_data(text: str, what: str) -> Any:
    """A Python literal of plain data (what a probe sends: dicts with string keys, lists, strings, ints,
    finite floats, booleans, None), parsed without running anything; anything else is a `Fail`."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise Fail(f"{what}: not plain data ({type(exc).__name__})") from None
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise Fail(f"{what}: nested deeper than {MAX_DEPTH} levels")
        if type(item) is dict:
            if not all(type(k) is str for k in item):
                raise Fail(f"{what}: a key that is not a string")
            stack.extend((v, depth + 1) for v in item.values())
        elif type(item) is list:
            stack.extend((v, depth + 1) for v in item)
        elif type(item) not in (str, int, float, bool, type(None)) or (type(item) is float and item - item != 0):
            raise Fail(f"{what}: not plain data ({type(item).__name__})")
    return value


# The driver's prelude, after `_INPUT = ...` and `_MARK = ...`: the grader's probe runs as a user's Python
# run would (`python3 -` reading the program from its standard input, like the agent's python tool), so
# everything the agent's prints go where they would go; the result leaves on standard output between two
# marks, written with os.write and followed by os._exit so no atexit hook or finalizer of the agent's runs
# after it. It imports nothing (a module of the workspace's could stand in for any import): its helpers
# are builtins, `os` and `sys`, already loaded when the interpreter starts.
PRELUDE = r"""
import os as _os, sys as _sys
_type, _isinstance, _ascii = type, isinstance, ascii
_SCALARS = (str, int, bool, type(None))


def _plainly(value, depth=0):
    kind = _type(value)
    if kind in _SCALARS or (kind is float and value - value == 0):
        return value
    if depth < 64 and kind is list:
        return [_plainly(v, depth + 1) for v in value]
    if depth < 64 and kind is dict and all(_type(k) is str for k in value):
        return {k: _plainly(v, depth + 1) for k, v in value.items()}
    raise TypeError(kind.__name__)


def _plain(value):
    try:
        return {"value": _plainly(value)}
    except Exception as exc:
        return {"unserializable": _type(value).__name__, "why": _type(exc).__name__}


def _call(fn, *args):
    try:
        return _plain(fn(*args))
    except BaseException as exc:
        return {"raised": _type(exc).__name__, "value_error": _isinstance(exc, ValueError)}


def _emit(result):
    data = (_MARK + _ascii(result) + _MARK).encode()
    while data:
        data = data[_os.write(1, data):]
    _os._exit(0)


"""


def _limit_fail(done: sandbox.Completed, wall_s: float, cpu_s: float) -> None:
    if done.limit == "CPU time":
        raise Fail(f"the code ran past the CPU time limit ({cpu_s:g} s)")
    if done.limit:
        raise Fail(f"the code ran past the {done.limit} limit ({wall_s:g} s wall, {cpu_s:g} s CPU, 1 MiB output)")


def _tail(done: sandbox.Completed) -> str:
    lines = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
    return (lines[-1:] or ["no output"])[0][:200]


def run_as_instructed(
    command: str, *, wall_s: float = 60.0, cpu_s: float = 30.0, workspace: Path | None = None
) -> sandbox.Completed:
    """Run a shell command as the task's instructions have a user run it: `bash --login -c COMMAND` in a
    fresh sandbox over a copy of the workspace (its bytecode left out), started exactly as the agent's bash
    tool starts one. Returns what it did (exit status, output); a run past a limit is a `Fail`."""
    done = sandbox.run_once(
        ["bash", "--login", "-c", command], Path(workspace or os.getcwd()), wall_s=wall_s, cpu_s=cpu_s
    )
    _limit_fail(done, wall_s, cpu_s)
    return done


def probe(
    source: str,
    inputs: Any,
    *,
    command: str = "python3 -",
    wall_s: float = 30.0,
    cpu_s: float = 10.0,
    workspace: Path | None = None,
) -> Any:
    """Run the grader's probe `source` (after PRELUDE; it ends with `_emit(result)`) as a user's Python
    run: `bash --login -c COMMAND` (`python3 -` unless the task's instructions say otherwise, like
    `PYTHONPATH=src python3 -`) with the program on its standard input, in a fresh sandbox over a copy of
    the workspace, the path in the order the user's run has it. The agent's code sees what it would see in
    a run of the user's. Returns the probe's result, parsed strictly as data; the grader compares it with
    what it holds (never a count or a verdict of the probe's): a crash, a hang, junk or no result is a
    `Fail`."""
    mark = f"\x1e{secrets.token_hex(8)}\x1e"
    code = f"_INPUT = {inputs!r}\n_MARK = {mark!r}\n" + PRELUDE + source
    done = sandbox.run_once(
        ["bash", "--login", "-c", command],
        Path(workspace or os.getcwd()),
        input=code.encode(),
        wall_s=wall_s,
        cpu_s=cpu_s,
    )
    _limit_fail(done, wall_s, cpu_s)
    text = done.stdout.decode("utf-8", errors="replace")
    parts = text.rsplit(mark, 2)
    if done.returncode != 0 and len(parts) < 3:
        raise Fail(f"the code exited with status {done.returncode}: {_tail(done)}")
    if len(parts) < 3:
        raise Fail(f"the code gave no result: {_tail(done)}")
    return parse_data(parts[1], "the probe's result")


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
