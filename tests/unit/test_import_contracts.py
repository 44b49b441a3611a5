"""The import-linter contracts in pyproject.toml ([tool.importlinter]) hold, and the headless packages have
no import cycles (checked on the same grimp graph import-linter builds)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def test_import_linter_contracts_are_kept():
    exe = str(LINT_IMPORTS) if LINT_IMPORTS.exists() else shutil.which("lint-imports")
    assert exe, "lint-imports is not installed (pip install the test extra: import-linter)"
    result = subprocess.run([exe, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]
    assert "0 broken" in result.stdout and "2 kept" in result.stdout


def test_headless_packages_have_no_import_cycles():
    graph = grimp.build_graph("engine", "replays", cache_dir=None)
    cycles = []
    for module in sorted(graph.modules):
        if not module.startswith(("engine", "replays")):
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            if imported != module and graph.chain_exists(importer=imported, imported=module):
                cycles.append(f"{module} <-> {imported}")
    assert not cycles, "import cycles: " + "; ".join(cycles)
