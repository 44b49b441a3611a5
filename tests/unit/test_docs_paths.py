"""Every `frank/...` path that README.md and docs/*.md name exists in the tree (a moved module leaves no
stale pointer behind)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PATH = re.compile(r"(?<![\w./-])frank/[\w./*{},-]*[\w/*}]")


def named_paths() -> list[tuple[str, int, str]]:
    out = []
    for doc in DOCS:
        for number, line in enumerate(doc.read_text().splitlines(), start=1):
            out.extend((doc.name, number, m.group(0)) for m in PATH.finditer(line))
    return out


def exists(path: str) -> bool:
    if "{" in path:  # frank/engine/{a,b}.py
        head, rest = path.split("{", 1)
        options, tail = rest.split("}", 1)
        return all(exists(head + option + tail) for option in options.split(","))
    if "*" in path:
        return any(REPO.glob(path))
    return (REPO / path).exists()


def test_the_docs_name_paths_at_all():
    assert len(named_paths()) > 30


@pytest.mark.parametrize(("doc", "line", "path"), named_paths(), ids=lambda x: str(x))
def test_a_named_path_exists(doc: str, line: int, path: str) -> None:
    assert exists(path), f"{doc}:{line}: {path} does not exist"


def test_a_missing_path_is_caught() -> None:
    assert not exists("frank/replays/runner.py") and not exists("frank/engine/{metrics,nothing}.py")
