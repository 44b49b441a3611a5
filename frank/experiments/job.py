"""The `experiment` job kind: `python -m frank.experiments.job RUN_ID` runs (or resumes) a registered
run with the real engine, detached from any terminal when frank.jobs.launch starts it.

The runner holds the run's lock (runner.lock) and journals every event with an fsync; SIGTERM stops it
cleanly (the cell in flight is recorded as interrupted and redone on resume).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from frank import jobs, readfile
from frank.errors import FrankError
from frank.experiments import noise_report, registry
from frank.experiments.journal import fold, read_events
from frank.experiments.runner import run_experiment
from frank.jobs.states import JobEnd

ENDED: dict[str, JobEnd] = {
    "finished": "finished",
    "interrupted": "cancelled",
    "time_limit": "cancelled",  # stopped between cells at its time limit: resumable as after a cancel
    "retries_exhausted": "failed",
    "error": "failed",
}


def progress(run_dir: Path) -> jobs.Progress:
    """Cells done over cells planned, from the journal; how the last runner ended."""
    try:
        order = readfile.read_object(run_dir / "run.json").get("order") or {}
    except FrankError:
        order = {}
    planned = len(order.get("slots") or ()) or None
    state = fold(read_events(run_dir / "journal.jsonl"))
    done = sum(1 for slot in state.attempts if state.done(slot) is not None)
    if not state.runner_sessions:
        return jobs.Progress(done=0, planned=planned, ended="pending", detail="registered, never run")
    current = ", ".join(f"start {a.slot + 1} ({a.phase})" for a in state.open_attempts)
    detail = current or state.stopped_reason or ""
    return jobs.Progress(done=done, planned=planned, ended=ENDED.get(state.stopped_reason or ""), detail=detail)


KIND = jobs.JobKind(
    name="experiment",
    module="frank.experiments.job",
    root=registry.experiments_dir,
    progress=progress,
    is_run=lambda d: (d / "design.toml").is_file() or (d / "screen.toml").is_file(),  # a design's or a screen's
    record_files=lambda d: [d / "journal.jsonl"],
    lock_name="runner.lock",
)


STOP_BY_ENV = "FRANK_RUN_STOP_BY"  # the runner's time limit (time.time()), handed to the job process


def launch(run: registry.Run, stop_by: float | None = None) -> jobs.JobStatus:
    """Run or resume `run` detached (what `frank experiment run --detach` and the console do); with
    `stop_by` (time.time()) the runner starts no cell after it."""
    env = {STOP_BY_ENV: repr(stop_by)} if stop_by is not None else {}
    return jobs.launch(KIND, run.folder, env=env)


def main(argv: list[str] | None = None) -> int:
    from frank.experiments.placement import executor_for

    run_dir = jobs.main_run_dir(argv, KIND)
    run = registry.load_run(run_dir.name)
    stop_by = os.environ.pop(STOP_BY_ENV, None)  # not inherited by the engines it starts
    result = run_experiment(
        run,
        executor_for(run),
        handle_signals=True,
        on_event=lambda e: print(json.dumps(e, default=str), flush=True),
        stop_by=float(stop_by) if stop_by else None,
    )
    print(f"runner stopped: {result.reason} ({result.message}); {result.cells_run} cells run", flush=True)
    if result.reason == "finished" and noise_report.is_study(run.folder):  # `frank experiment noise DESIGN`
        print(noise_report.finish_study(run), flush=True)
    return 0 if result.reason == "finished" else 3


if __name__ == "__main__":
    sys.exit(main())
