"""`pip install --no-deps --target DIR .` puts exactly one top-level package, `frank`, into DIR, with every
file of the tree: the profiles, experiment designs, episode suites (graders and references), fidelity text
sets, campaign examples and the console's stylesheet ship, not only the modules."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _files(root: Path) -> set[str]:
    return {
        str(p.relative_to(root))
        for p in (root / "frank").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def test_one_top_level_package_with_all_its_files(tmp_path: Path) -> None:
    src = tmp_path / "src"  # a copy: the build leaves build/ and *.egg-info where it runs
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "frank", src / "frank", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    target = tmp_path / "target"
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    top = sorted(p.name for p in target.iterdir() if not p.name.endswith(".dist-info") and p.name != "bin")
    assert top == ["frank"], f"top-level entries besides frank: {top}"
    shipped, tree = _files(target), _files(REPO)
    assert not tree - shipped, f"not installed: {sorted(tree - shipped)[:20]}"
    for data in (
        "frank/engine/profiles/embedded-cpu.toml",
        "frank/experiments/designs/region-cache-on-off.toml",
        "frank/episodes/suites/w01-mini.toml",
        "frank/fidelity/sets/code/texts.jsonl",
        "frank/campaign/examples/seed.toml",
        "frank/console/frank.tcss",
    ):
        assert data in shipped, data
    scripts = [p.name for p in (target / "bin").iterdir()] if (target / "bin").exists() else []
    assert scripts == ["frank"], scripts
