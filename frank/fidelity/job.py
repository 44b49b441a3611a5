"""The `fidelity` job kind: one fidelity measurement of the running engine, worked on by one process, in the
foreground (`frank fidelity run`) or detached (`frank fidelity run --detach`, the console's f):
`python -m frank.fidelity.job RUN`. It shows in `frank jobs list`, survives the terminal, and
`frank jobs cancel RUN` stops it (SIGTERM: the reference subprocess is killed, nothing is saved).

The run folder is the saved run's own (`<runs>/fidelity/<run id>/`): job.json holds the spec (sets, label),
progress.jsonl one line per step, and run.json the result once it finished (frank.fidelity.runs.save_run).
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frank import jobs, jsonl, paths, readfile
from frank.errors import FrankError
from frank.fidelity.runs import FidelityRun, fidelity_runs_dir, run_fidelity, save_run

PROGRESS = "progress.jsonl"
CANCELLED = "cancelled.json"
RESULT = "run.json"


class Cancelled(Exception):
    """Raised in the job's main thread by SIGTERM/SIGINT: the measurement stops where it is."""


@dataclass(frozen=True)
class FidelitySpec:
    """A fidelity job's launch spec (job.json's `spec`): the sets it measures and its label."""

    sets: tuple[str, ...]
    label: str = ""


def _spec(run_dir: Path) -> FidelitySpec:
    spec = jobs.read_job_file(run_dir).spec or {}
    return FidelitySpec(tuple(spec.get("sets") or ()), str(spec.get("label") or ""))


def progress(run_dir: Path) -> jobs.Progress:
    spec = _spec(run_dir)
    planned = len(spec.sets) or None
    steps = []
    try:
        steps = jsonl.read(run_dir / PROGRESS)
    except (OSError, FrankError):
        pass
    detail = jobs.read_job_file(run_dir).error or (steps[-1]["line"] if steps else "")
    if (run_dir / RESULT).is_file():
        try:
            run = readfile.read_object(run_dir / RESULT)
        except FrankError:
            run = {}
        sets = run.get("sets") or []
        kls = ", ".join(f"{s['name']} {s['kl']:.2e}" for s in sets if s.get("kl") is not None)
        return jobs.Progress(
            len(sets), len(sets), "finished", run.get("created_at"), f"KL {kls}" if kls else "finished", extra={}
        )
    if (run_dir / CANCELLED).is_file():
        try:
            at = readfile.read_object(run_dir / CANCELLED).get("at")
        except FrankError:
            at = None
        return jobs.Progress(0, planned, "cancelled", at, detail or "cancelled")
    return jobs.Progress(0, planned, None, None, detail)


KIND = jobs.JobKind(
    name="fidelity",
    module="frank.fidelity.job",
    root=fidelity_runs_dir,
    progress=progress,
    is_run=lambda d: (d / jobs.JOB_FILE).is_file(),
    record_files=lambda d: [d / PROGRESS],
)


def prepare(sets: list[str] | None = None, label: str = "") -> Path:
    """A new run folder with what to measure; nothing runs yet."""
    from frank.fidelity.runs import load_sets

    names = [s.name for s in load_sets(sets)]  # every set checked before anything starts
    run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-run-{secrets.token_hex(2)}"
    run_dir = paths.private_dir(fidelity_runs_dir() / run_id)
    jobs.write_job_file(run_dir, KIND.name, None, spec={"sets": list(sets) if sets else names, "label": label})
    return run_dir


def launch(run_dir: Path) -> jobs.JobStatus:
    """Start the measurement detached; returns at once."""
    return jobs.launch(KIND, run_dir)


def _raise_cancelled() -> None:
    raise Cancelled


def run(run_dir: Path, echo: Any = None) -> FidelityRun | None:
    """Measure in this process, holding the run's lock; returns the saved run, or None when cancelled."""
    spec = _spec(run_dir)
    (run_dir / CANCELLED).unlink(missing_ok=True)

    def step(line: str) -> None:
        jsonl.append(run_dir / PROGRESS, {"t": time.time(), "line": line})
        if echo is not None:
            echo(line)

    with jobs.JobProcess(KIND, run_dir, on_cancel=_raise_cancelled):
        try:
            result = run_fidelity(spec.sets or None, progress=step, label=spec.label, save=False)
        except Cancelled:
            paths.write_private(run_dir / CANCELLED, json.dumps({"at": time.time()}) + "\n")
            return None
        result["id"] = run_dir.name  # saved in this folder: the job's run is the saved run
        result["path"] = str(save_run(result))
        return result


def main(argv: list[str] | None = None) -> int:
    run_dir = jobs.main_run_dir(argv, KIND)
    result = run(run_dir, echo=lambda line: print(line, flush=True))
    return 0 if result is not None else 3


if __name__ == "__main__":
    sys.exit(main())
