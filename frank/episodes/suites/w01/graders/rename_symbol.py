"""Grader: the code under src/ is the original program with fetch_record renamed to load_record and nothing
else changed (compared as syntax trees, so comments and layout are free; each file parsed from its bytes
as the interpreter reads it, its encoding declaration honoured), README.md is untouched, the instruction's
command runs src/shop and nothing at the workspace root stands in for it, and the program behaves as the
original did: through its API (every view's value, load_record, main's output) and through the
instruction's own command, each run as a user runs it."""

import ast
import os
import stat
from importlib.machinery import PathFinder

from frank.episodes.judge import Fail, grade, probe, read_bytes, read_text, run_as_instructed, same

OLD, NEW = "fetch_record", "load_record"
RUN = "PYTHONPATH=src python -m shop.main"  # the instruction's command: the workspace root, then src/
PROBE = """
import contextlib, importlib, io
store = importlib.import_module("shop.store")
values = {name: [_call(fn) for fn in importlib.import_module("shop." + name).ALL] for name in _INPUT}
out = io.StringIO()
with contextlib.redirect_stdout(out):
    importlib.import_module("shop.main").main()
_emit({
    "values": values,
    "old_left": hasattr(store, "fetch_record"),
    "load_record": _call(store.load_record, "probe-key") if hasattr(store, "load_record") else None,
    "output": out.getvalue(),
})
"""


class Rename(ast.NodeTransformer):
    """The original tree with every identifier `fetch_record` (name, definition, import, attribute,
    argument) spelled `load_record`: what the task asks for, and nothing else."""

    def generic_visit(self, node):
        for field in ("id", "name", "asname", "attr", "arg"):
            if getattr(node, field, None) == OLD:
                setattr(node, field, NEW)
        return super().generic_visit(node)


def _tree(source: bytes, path: str) -> str:
    try:
        return ast.dump(ast.parse(source, path))  # from bytes, as an import compiles it
    except (SyntaxError, ValueError) as exc:
        raise Fail(f"{path} does not parse: {exc}") from None
    except (RecursionError, MemoryError):
        raise Fail(f"{path} is nested too deeply to parse") from None


def _python_files() -> set[str]:
    if os.path.islink("src") or not os.path.isdir("src"):
        raise Fail("src/ is not a directory")
    found = set()
    for dirpath, dirnames, filenames in os.walk("src"):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in dirnames + filenames:
            if stat.S_ISLNK(os.lstat(os.path.join(dirpath, name)).st_mode):
                raise Fail(f"{os.path.join(dirpath, name)} is a symbolic link")
        found.update(os.path.join(dirpath, f) for f in filenames)
    return found


def check(expected):
    if read_text("README.md") != expected["readme"]:
        raise Fail("README.md was changed")
    sources = expected["sources"]
    files = _python_files()
    if files != set(sources):
        extra, missing = sorted(files - set(sources)), sorted(set(sources) - files)
        raise Fail(f"the files under src/ changed: new {extra[:3]}, gone {missing[:3]}")
    differ = []
    for path, original in sorted(sources.items()):
        want = ast.dump(Rename().visit(ast.parse(original, path)))
        if _tree(read_bytes(path), path) != want:
            differ.append(path)
    if differ:
        raise Fail(f"{len(differ)} file(s) differ from the original beyond the rename: {differ[:3]}")
    root = os.getcwd()
    found = PathFinder.find_spec("shop", [root, os.path.join(root, "src")])  # the instruction's path order
    if found is None or found.origin != os.path.join(root, "src", "shop", "__init__.py"):
        where = os.path.relpath(found.origin or found.submodule_search_locations[0], root) if found else "nothing"
        raise Fail(f"`{RUN}` would import shop from {where}, not from src/shop")
    result = probe(PROBE, sorted(expected["values"]), command="PYTHONPATH=src python3 -", cpu_s=10, wall_s=30)
    if not isinstance(result, dict):
        raise Fail("the probe's result is malformed")
    want_values = {name: [{"value": v} for v in vs] for name, vs in expected["values"].items()}
    if not same(result.get("values"), want_values):
        raise Fail("the views return other values than the original program's")
    if result.get("old_left") is not False:
        raise Fail("shop.store still has fetch_record")
    if not same(result.get("load_record"), {"value": {"key": "probe-key"}}):
        raise Fail("shop.store.load_record does not return the record")
    if not same(result.get("output"), expected["output"]):
        raise Fail(f"shop.main printed {str(result.get('output'))[:40]!r}, the original {expected['output']!r}")
    done = run_as_instructed(RUN, cpu_s=10, wall_s=30)
    printed = done.stdout.decode(errors="replace")
    if done.returncode != 0 or printed != expected["output"]:
        raise Fail(
            f"`{RUN}` exited {done.returncode} and printed {printed[:40]!r}, the original {expected['output']!r}"
        )
    return "renamed, and the program behaves as before, through its API and through its command"


grade(check)
