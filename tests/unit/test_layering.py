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
# inspect_harness runs in the agent venv (inspect-ai): checked below by what it imports.
AGENT_SIDE = "frank.episodes.inspect_harness"
HEADLESS = [
    m
    for m in _modules()
    if not m.startswith(("frank.console", "frank.engine.region_cache"))
    and m not in ("frank.engine.models.tiny_model", AGENT_SIDE)
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


def test_agent_side_harness_imports_only_stdlib_and_inspect_ai():
    """The inspect harness runs in .venv-agent, which has inspect-ai but not this project's dependencies."""
    import ast

    tree = ast.parse((REPO / "frank" / "episodes" / "inspect_harness.py").read_text())
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            roots.add(node.module.split(".")[0])
    assert roots - set(sys.stdlib_module_names) == {"inspect_ai"}
