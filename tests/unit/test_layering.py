"""The floors below frank.console never import textual or frank.console (a fresh interpreter per module)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _modules() -> list[str]:
    names = ["frank"]
    for info in pkgutil.walk_packages([str(REPO / "frank")], prefix="frank."):
        names.append(info.name)
    return names


# region_cache runs inside the vLLM API server (engine venv): it is checked by its own tests there.
# the inspect harness, its sandbox and the schema agent run in the agent venv (inspect-ai): checked below by
# what they import.
AGENT_SIDE = (
    "frank.episodes.inspect_harness",
    "frank.episodes.inspect_sandbox",
    "frank.episodes.schema_agent",
    "frank.episodes.schema_calls",
)
HEADLESS = [
    m
    for m in _modules()
    if not m.startswith(("frank.console", "frank.plugins.region_cache"))
    and m not in ("frank.engine.models.tiny_model", *AGENT_SIDE)
]


@pytest.mark.parametrize("module", HEADLESS)
def test_headless_module_does_not_import_textual_or_console(module):
    code = (
        f"import sys, importlib; importlib.import_module({module!r}); "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'inspect_ai') "
        "or m.startswith('frank.console')); "
        "print(','.join(bad)); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{module} imports {result.stdout.strip()} {result.stderr[-500:]}"


def test_headless_cli_commands_do_not_import_textual():
    code = "import sys; import frank.console.cli as c; c.build_parser(); sys.exit(1 if 'textual' in sys.modules else 0)"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-800:]


def _imports(module: str) -> set[str]:
    import ast

    tree = ast.parse((REPO / (module.replace(".", "/") + ".py")).read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_agent_side_imports_only_stdlib_inspect_ai_and_the_stdlib_only_sandbox():
    """The inspect harness, its sandbox and the schema agent run in .venv-agent, which has inspect-ai (and
    its jsonschema) but not this project's dependencies: they import the standard library, inspect-ai,
    jsonschema, each other and frank.episodes.sandbox, which imports the standard library only."""
    stdlib = set(sys.stdlib_module_names)
    for module in AGENT_SIDE:
        names = _imports(module)
        roots = {n.split(".")[0] for n in names} - stdlib
        assert roots <= {"inspect_ai", "jsonschema", "frank"}, (module, roots)
        project = {n for n in names if n.startswith("frank.") and not n.startswith(AGENT_SIDE)}
        assert project <= {
            "frank.episodes.sandbox.WORKSPACE",
            "frank.episodes.sandbox.Sandbox",
            "frank.episodes.sandbox.spawn_options",
        }, (module, project)
    assert {n.split(".")[0] for n in _imports("frank.episodes.schema_calls")} <= stdlib | {"__future__", "jsonschema"}
    assert {n.split(".")[0] for n in _imports("frank.episodes.sandbox")} <= stdlib | {"__future__"}
