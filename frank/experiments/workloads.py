"""The workload a design names: found (beside the design, a built-in, or in the user's workloads dir),
its draws checked, its manifest hashed. Used at registration (registry) and before each cell (cell)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from frank import readfile
from frank.errors import FrankError
from frank.experiments.design import Design
from frank.experiments.errors import RunError
from frank.workloads import catalog
from frank.workloads.format import read_manifest


def resolve_workload(design: Design, source_path: str | None) -> Path:
    """A workload folder: a path (relative to the design file's folder at registration), a built-in name
    (w01-mini, w01-full: generated on first use) or a name in the user's workloads dir."""
    assert design.workload is not None
    name = design.workload.name
    if source_path and not Path(name).is_absolute():
        beside = Path(source_path).parent / name
        if (beside / "workload.toml").is_file():
            return beside.resolve()
    try:
        path = catalog.resolve_workload(name)
    except FrankError as exc:
        raise RunError(f"workload.name: {exc}") from None
    if not (path / "workload.toml").is_file():
        raise RunError(f"workload.name: {path} is not a workload folder (no workload.toml)")
    return path.resolve()


def check_draws(design: Design, path: Path) -> None:
    """The design's draws exist in the workload (checked before any engine start)."""
    assert design.workload is not None
    names = read_manifest(path).draw_names
    for i, draw in enumerate(design.workload.draws):
        if str(draw) not in names:
            raise RunError(f"workload.draws[{i}]: {path} has no draw named {str(draw)!r} (draws: {', '.join(names)})")


def manifest_sha256(path: Path) -> str:
    return hashlib.sha256(readfile.read_bytes(path / "workload.toml", readfile.TOML, RunError)).hexdigest()
