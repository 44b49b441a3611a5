"""Registration freezes a design: a private run folder with the design's copy, hashes, seed and order.

    runs_dir()/experiments/<run-id>/
        design.toml              byte copy of the design as registered
        design.canonical.json    its canonical form (SHA-256 = design_sha256)
        run.json                 run id, hashes, seed, drawn order, smallest reachable p
        journal.jsonl            every event from registration on (journal.py)
        runner.lock              held (flock) by the one runner working on this run
        cells/                   the replay records of each attempt

From then on only the frozen copy is used; loading a run re-hashes it and refuses when anything was
altered (the copy, its canonical form, or the order recorded in run.json against the journal's).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from frank import paths, readfile
from frank.errors import FrankError
from frank.experiments import exact
from frank.experiments.design import Design, load_design, parse_design_text
from frank.experiments.errors import RunError  # noqa: F401  (raised here, re-exported)
from frank.experiments.journal import Journal, read_events
from frank.experiments.randomize import DrawnOrder, Slot, draw_order, new_seed
from frank.experiments.workloads import check_draws, manifest_sha256, resolve_workload


@dataclass(frozen=True)
class Run:
    run_id: str
    folder: Path
    design: Design
    meta: dict[str, Any]
    slots: tuple[Slot, ...]

    @property
    def journal_path(self) -> Path:
        return self.folder / "journal.jsonl"

    @property
    def lock_path(self) -> Path:
        return self.folder / "runner.lock"

    @property
    def log_path(self) -> Path:
        return self.folder / "job.log"  # frank.jobs.LOG_FILE

    def cell_dir(self, slot: int, attempt: int) -> Path:
        return paths.private_dir(self.folder / "cells" / f"slot{slot + 1:02d}-attempt{attempt}")


BUILTIN_DESIGNS = Path(__file__).resolve().parent / "designs"
DESIGN_FILE, SCREEN_FILE = "design.toml", "screen.toml"  # a run folder's frozen copy: one or the other


def design_files() -> list[Path]:
    """Built-in designs, then the user's (config dir designs/)."""
    found = sorted(BUILTIN_DESIGNS.glob("*.toml"))
    user = paths.config_dir() / "designs"
    if user.is_dir():
        found += sorted(user.glob("*.toml"))
    return found


def experiments_dir(create: bool = True) -> Path:
    path = paths.runs_dir(create) / "experiments"
    return paths.private_dir(path) if create else path


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "experiment"


def register(design_path: Path | str, seed: int | None = None, part: str = "") -> Run:
    """Validate, freeze, draw the order; nothing of this is changed afterwards. `part`: the campaign part(s)
    the design tests (frank.campaign.actions.part_of_design), recorded for the exporter's `part` label."""
    design_path = Path(design_path)
    design = load_design(design_path, check_profiles=True)
    exact.check_reachable(design, str(design_path))
    return freeze(design, design_path, seed=seed, part=part)


def register_screen(screen_path: Path | str, seed: int | None = None) -> Run:
    """Freeze a screen (frank.experiments.screen) like a design: its runnable form's order drawn and
    recorded, its TOML kept as screen.toml."""
    from frank.experiments.screen import load_screen

    screen_path = Path(screen_path)
    screen = load_screen(screen_path, check_profiles=True)
    return freeze(screen.design, screen_path, seed=seed, kind="screen", file=SCREEN_FILE)


def freeze(
    design: Design,
    design_path: Path,
    *,
    seed: int | None = None,
    kind: str = "",
    file: str = DESIGN_FILE,
    part: str = "",
) -> Run:
    """The run folder of a checked design (or a screen's runnable design: kind "screen", its TOML kept as
    screen.toml), the order drawn from `seed`."""
    source = readfile.read_bytes(design_path, readfile.TOML, RunError)
    now = datetime.now(UTC)
    run_id = f"{now:%Y%m%d-%H%M%S}-{_slug(design.name)}-{secrets.token_hex(2)}"
    order: DrawnOrder | None = None
    workload: WorkloadRecord | None = None
    if design.runnable:  # every check before the run's folder exists: a refusal leaves nothing behind
        workload = _suite_record(design, design_path) if design.episodes else _workload_record(design, design_path)
        order = draw_order(design, seed if seed is not None else new_seed())
    folder = experiments_dir() / run_id
    paths.private_dir(folder)
    meta = {
        "run_id": run_id,
        "name": design.name,
        "question": design.question,
        "kind": kind or design.kind,
        "registered_at": now.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "source_path": str(design_path.resolve()),
        "design_sha256": design.sha256,
        "source_sha256": hashlib.sha256(source).hexdigest(),
        "order": order.to_json() if order else None,
        "null_size": exact.null_size(design),
        "smallest_p": exact.smallest_p(design),
        "workload": workload.to_json() if workload else None,
        **({"part": part} if part else {}),
    }
    (folder / file).write_bytes(source)
    (folder / file).chmod(0o600)
    paths.write_private(folder / "design.canonical.json", design.canonical + "\n")
    paths.write_private(folder / "run.json", json.dumps(meta, indent=2, sort_keys=True) + "\n")
    with Journal(folder / "journal.jsonl") as journal:
        journal.append("registered", **meta)
    return load_run(run_id)


@dataclass(frozen=True)
class WorkloadRecord:
    """run.json's `workload`: what each start replays (or, with [episodes], the suite it runs), as found at
    registration; `run` refuses a workload or suite changed since."""

    path: str | None  # the workload folder; None: not here at registration, or a suite's run
    manifest_sha256: str | None
    note: str = ""  # why the workload was not found
    suite: str = ""  # an [episodes] design's suite manifest
    suite_sha256: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "manifest_sha256": self.manifest_sha256}
        if self.note:
            out["note"] = self.note
        if self.suite:
            out |= {"suite": self.suite, "suite_sha256": self.suite_sha256}
        return out


def _workload_record(design: Design, design_path: Path) -> WorkloadRecord:
    """Where the workload is and its manifest hash, when it is here at registration (the seed's designs are
    registered on the machine that has W01); `run` refuses a workload changed since."""
    try:
        path = resolve_workload(design, str(design_path.resolve()))
    except RunError as exc:
        return WorkloadRecord(None, None, note=f"not found at registration: {exc}")
    try:
        check_draws(design, path)
    except RunError as exc:
        raise RunError(f"{design_path}: {exc}") from None
    return WorkloadRecord(str(path), manifest_sha256(path))


def _suite_record(design: Design, design_path: Path) -> WorkloadRecord:
    """An [episodes] design's suite, checked now (every error before anything runs) and hashed: `run`
    refuses a suite changed since."""
    from frank.episodes.suite import load_suite

    assert design.episodes is not None
    beside = design_path.resolve().parent / design.episodes.suite
    try:
        suite = load_suite(beside if beside.is_file() else design.episodes.suite)
    except FrankError as exc:
        raise RunError(f"{design_path}: episodes.suite: {exc}") from None
    return WorkloadRecord(
        None,
        None,
        suite=str(suite.path),
        suite_sha256=hashlib.sha256(readfile.read_bytes(suite.path, readfile.TOML, RunError)).hexdigest(),
    )


def resolve_run_id(run_id: str) -> Path:
    folder = experiments_dir() / run_id
    if run_id and "/" not in run_id and folder.is_dir():
        return folder
    matches = [p for p in experiments_dir().iterdir() if p.is_dir() and p.name.startswith(run_id)] if run_id else []
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunError(f"no registered experiment {run_id!r} in {experiments_dir()} (see `frank experiment list`)")
    raise RunError(f"{run_id!r} matches {len(matches)} runs: {', '.join(sorted(p.name for p in matches))}")


def load_run(run_id: str, *, verify: bool = True) -> Run:
    folder = resolve_run_id(run_id)
    screen = (folder / SCREEN_FILE).exists()
    frozen = folder / (SCREEN_FILE if screen else DESIGN_FILE)
    try:
        meta = readfile.read_object(folder / "run.json")
        source = readfile.read_bytes(frozen, readfile.TOML)
    except FrankError as exc:
        raise RunError(f"{folder}: run folder is incomplete or damaged: {exc}") from None
    if screen:
        from frank.experiments.screen import parse_screen_text

        design = parse_screen_text(readfile.decode(source, frozen, RunError), str(frozen)).design
    else:
        design = parse_design_text(readfile.decode(source, frozen, RunError), str(frozen))
    if verify:
        _verify(folder, meta, source, design)
    slots = tuple(Slot.from_json(s) for s in (meta.get("order") or {}).get("slots", []))
    return Run(run_id=folder.name, folder=folder, design=design, meta=meta, slots=slots)


def _verify(folder: Path, meta: dict[str, Any], source: bytes, design: Design) -> None:
    problems = []
    if hashlib.sha256(source).hexdigest() != meta.get("source_sha256"):
        problems.append("the frozen copy was altered after registration (source hash mismatch)")
    if design.sha256 != meta.get("design_sha256"):
        problems.append(
            f"the design's canonical hash is {design.sha256[:12]}…, registered {str(meta.get('design_sha256'))[:12]}…"
        )
    canonical_file = readfile.read_bytes_if(folder / "design.canonical.json", readfile.JSON, RunError)
    canonical = (
        readfile.decode(canonical_file, folder / "design.canonical.json", RunError).strip() if canonical_file else ""
    )
    if hashlib.sha256(canonical.encode()).hexdigest() != meta.get("design_sha256"):
        problems.append("design.canonical.json was altered (hash mismatch)")
    events = read_events(folder / "journal.jsonl")
    registered = events[0] if events and events[0].get("event") == "registered" else None
    if registered is None:
        problems.append("the journal does not start with its registration")
    else:
        for key in ("design_sha256", "source_sha256", "order"):
            if registered.get(key) != meta.get(key):
                problems.append(f"run.json's {key} differs from the one recorded at registration")
    if problems:
        raise RunError(f"{folder}: refusing the frozen run: " + "; ".join(problems))


def list_runs() -> list[dict[str, Any]]:
    out = []
    for folder in sorted(experiments_dir().iterdir()):
        try:
            out.append(readfile.read_object(folder / "run.json"))
        except FrankError:
            continue
    return out
