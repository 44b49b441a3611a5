"""Rules of the tree that are checkable by reading it (issue 28), pinned so they cannot come back:

- no module under frank/ passes a `frank.` module name to importlib (a floor naming a higher one in a
  string, a dependency import-linter cannot see);
- every logger in frank/ is named by its module path (`logging.getLogger(__name__)`);
- no assertion in tests/ compares a value with `>= 0` alone (a count, a time or a percentage is never below
  zero: such an assertion cannot fail);
- every deadline poll in tests/ (`wait_until(`, `wait_for(`) has its result asserted;
- tests run the CLI through the one `frank_cli` fixture (tests/conftest.py), not a per-file helper.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
POLLS = {"wait_until", "wait_for"}
MODULE_NAME = re.compile(r"frank(\.[a-z_][a-z0-9_]*)+")


def _sources(root: str) -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted((REPO / root).rglob("*.py")):
        rel = path.relative_to(REPO)
        if "__snapshots__" in rel.parts or (
            rel.parts[:3] == ("frank", "episodes", "suites") and "graders" in rel.parts
        ):
            continue  # the graders import the agent's workspace package, not frank
        yield rel, ast.parse(path.read_text(), str(rel))


def _where(rel: Path, node: ast.AST) -> str:
    return f"{rel}:{node.lineno}"


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _names_frank_module(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_NAME.fullmatch(node.value) is not None
    )


def _uses_importlib(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "importlib" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "importlib":
            return True
    return False


def test_no_module_under_frank_hands_importlib_a_frank_module_name():
    """Neither directly (`import_module("frank.x")`) nor through a table of names (the old KIND_MODULES):
    a module that imports importlib names no frank module in a string."""
    found = []
    for rel, tree in _sources("frank"):
        uses_importlib = _uses_importlib(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _call_name(node) in ("import_module", "find_spec", "__import__"):
                if node.args and _names_frank_module(node.args[0]):
                    found.append(f"{_where(rel, node)} imports {node.args[0].value} by name")
            elif uses_importlib and _names_frank_module(node):
                found.append(f"{_where(rel, node)} names {node.value} in a module that uses importlib")
    assert found == [], "\n".join(found)


def test_every_logger_in_frank_is_named_by_its_module():
    found = [
        _where(rel, node)
        for rel, tree in _sources("frank")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and _call_name(node) == "getLogger"
        and not (len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id == "__name__")
    ]
    assert found == [], f"getLogger without __name__: {found}"


def _is_zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and not isinstance(node.value, bool) and node.value == 0


def _never_below_zero(compare: ast.Compare) -> bool:
    """`x >= 0`, `0 <= x` (not chained with an upper bound), `x > -1`."""
    if len(compare.ops) != 1:
        return False
    op, right = compare.ops[0], compare.comparators[0]
    minus_one = (
        isinstance(right, ast.UnaryOp) and isinstance(right.op, ast.USub) and getattr(right.operand, "value", None) == 1
    )
    return (
        (isinstance(op, ast.GtE) and _is_zero(right))
        or (isinstance(op, ast.LtE) and _is_zero(compare.left))
        or (isinstance(op, ast.Gt) and minus_one)
    )


def test_no_assertion_in_tests_is_a_bare_at_least_zero():
    found = [
        f"{_where(rel, node)}: {ast.unparse(node)}"
        for rel, tree in _sources("tests")
        for statement in ast.walk(tree)
        if isinstance(statement, ast.Assert)
        for node in ast.walk(statement.test)
        if isinstance(node, ast.Compare) and _never_below_zero(node)
    ]
    assert found == [], "state what must hold instead:\n" + "\n".join(found)


def _unasserted_polls(tree: ast.Module) -> list[ast.Call]:
    """Calls of a deadline poll (or of a test's own wrapper that returns one) that no `assert` reads."""
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}

    def statement_of(node: ast.AST) -> ast.AST:
        while not isinstance(node, ast.stmt):
            node = parents[node]
        return node

    def function_of(node: ast.AST) -> ast.AST | None:
        while node in parents:
            node = parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node
        return None

    names, bad, grown = set(POLLS), [], True
    while grown:  # a wrapper returning a poll's result is a poll too
        grown, bad = False, []
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names):
                continue
            statement = statement_of(node)
            if isinstance(statement, ast.Assert):
                continue
            wrapper = function_of(statement) if isinstance(statement, ast.Return) else None
            if wrapper is not None:
                if wrapper.name not in names:
                    names.add(wrapper.name)
                    grown = True
                continue
            bad.append(node)
    return bad


def test_every_deadline_poll_in_tests_has_its_result_asserted():
    found = [
        f"{_where(rel, node)}: {ast.unparse(node)[:100]}"
        for rel, tree in _sources("tests")
        for node in _unasserted_polls(tree)
    ]
    assert found == [], "assert the poll's result:\n" + "\n".join(found)


def test_the_poll_rule_catches_what_it_must():
    tree = ast.parse(
        "async def helper(p):\n    return await wait_until(p, f)\n"
        "async def t(p):\n    await helper(p)\n    assert await wait_until(p, f)\n    wait_for(f, 1)\n"
    )
    assert sorted(ast.unparse(n) for n in _unasserted_polls(tree)) == ["helper(p)", "wait_for(f, 1)"]
    assert [
        _never_below_zero(n)
        for n in ast.walk(ast.parse("x >= 0; 0 <= x; 0 <= x <= 9; x >= 0.0; x > -1; x >= 1"))
        if isinstance(n, ast.Compare)
    ] == [True, True, False, True, True, False]


def test_tests_run_the_cli_through_the_one_fixture():
    found = []
    for rel, tree in _sources("tests"):
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name in ("frank", "_frank", "frank_json", "run_json"):
                found.append(f"{_where(rel, node)}: a per-file `{node.name}` helper")
            if (
                rel != Path("tests/conftest.py")
                and isinstance(node, ast.Call)
                and _call_name(node) == "run"
                and node.args
                and isinstance(node.args[0], ast.List)
                and len(node.args[0].elts) >= 3
                and getattr(node.args[0].elts[2], "value", "") == "frank.console.cli"
            ):
                found.append(f"{_where(rel, node)}: subprocess.run of the CLI (use the frank_cli fixture)")
    assert found == [], "\n".join(found)


def test_no_local_environment_is_committed():
    """The venvs, the built models and the device folder are each machine's own (made by `make`); a committed
    link to them made a fresh clone's `make setup` fail (its venv could not be created over the link)."""
    import subprocess

    if not (REPO / ".git").exists():
        return  # an unpacked sdist: nothing is tracked
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    local = re.compile(r"^(\.venv[^/]*|\.build|\.device)(/|$)")
    assert [path for path in tracked.splitlines() if local.match(path)] == []
