"""The import-linter contracts in pyproject.toml ([tool.importlinter]) hold, and no package of frank has an
import cycle, counting imports under `if TYPE_CHECKING:` (a circle of types is still a circle)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
FLOORS = [
    "console",
    "campaign",
    "experiments",
    "episodes",
    "fidelity",
    "workloads",
    "jobs",
    "reports",
    "telemetry",
    "fleet",
    "engine",
    "paths",
    "jsonl",
    "tomlfile",
    "readfile",
    "nvml",
    "errors",
    "plugins",
]


def test_import_linter_contracts_are_kept():
    exe = str(LINT_IMPORTS) if LINT_IMPORTS.exists() else shutil.which("lint-imports")
    assert exe, "lint-imports is not installed (pip install the test extra: import-linter)"
    result = subprocess.run([exe, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]
    assert "0 broken" in result.stdout and "5 kept" in result.stdout


def test_the_layers_contract_lists_every_floor():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")
    listed = [name.strip() for layer in layers["layers"] for name in layer.split("|")]
    on_disk = sorted(
        p.stem
        for p in (REPO / "frank").iterdir()
        if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem != "__init__")
    )
    assert sorted(listed) == on_disk == sorted(FLOORS)


def _cycles(graph: grimp.ImportGraph, package: str) -> list[str]:
    cycles = []
    for module in sorted(graph.modules):
        if not module.startswith(package):
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            if imported != module and graph.chain_exists(importer=imported, imported=module):
                cycles.append(f"{module} <-> {imported}")
    return cycles


def test_no_import_cycles_anywhere_counting_type_checking_imports():
    graph = grimp.build_graph("frank", cache_dir=None, exclude_type_checking_imports=False)
    cycles = _cycles(graph, "frank")
    assert not cycles, "import cycles: " + "; ".join(cycles)


def test_the_cycle_check_finds_a_cycle_made_of_type_checking_imports(tmp_path, monkeypatch):
    """The check above can fail: two modules that import each other only for types are a cycle."""
    pkg = tmp_path / "circle_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circle_pkg import b\n")
    (pkg / "b.py").write_text("from circle_pkg import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("circle_pkg", cache_dir=None, exclude_type_checking_imports=False)
    assert "circle_pkg.a <-> circle_pkg.b" in _cycles(graph, "circle_pkg")


def test_the_plugins_contract_forbids_every_other_floor():
    """frank.plugins runs inside vLLM's processes: the contract must name every floor but its own."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c.get("source_modules") == ["frank.plugins"])
    forbidden = {m.removeprefix("frank.") for m in contract["forbidden_modules"] if m.startswith("frank.")}
    assert forbidden == set(FLOORS) - {"plugins"}
