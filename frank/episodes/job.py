"""The `episodes` job kind: one episode run folder worked on by one process, in the foreground
(`frank episodes run`) or detached (`--detach`, the console's menu): `python -m frank.episodes.job RUN`.

The job layer (frank.jobs) holds the run's lock (job.lock), ignores SIGHUP and turns SIGTERM/SIGINT
into a clean stop: the episode in flight is cut off, recorded as `error` (stopped) and the run can be
resumed. Progress comes from results.jsonl (one fsynced line per finished episode) and events.jsonl.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from frank import jobs
from frank.episodes.runner import EVENTS, RESULTS, RunOutcome, episodes_root, read_jsonl, read_run, run_episodes
from frank.jobs.states import JobEnd

# how a session ended (the last run_finished/run_stopped event) -> the job's end
ENDED: dict[str, JobEnd] = {"finished": "finished", "stopped": "cancelled", "interrupted": "failed"}
URL_ENV = "FRANK_EPISODES_URL"  # a detached run's --url


def progress(run_dir: Path) -> jobs.Progress:
    try:
        meta = read_run(run_dir)
    except (OSError, ValueError):
        return jobs.Progress()
    results = read_jsonl(run_dir / RESULTS)
    planned = meta["draws"] * len(meta["tasks"])
    ends = [e for e in read_jsonl(run_dir / EVENTS) if e.get("event") in ("run_started", "run_finished", "run_stopped")]
    if not ends:
        ended: JobEnd | Literal["pending"] | None = "pending"
    elif ends[-1]["event"] == "run_started":
        ended = None
    else:
        ended = ENDED.get(str(ends[-1].get("status")), "failed")
    parts = {
        f"draw {d}": (sum(r["draw"] == d for r in results), len(meta["tasks"])) for d in range(1, meta["draws"] + 1)
    }
    passed = sum(r["outcome"] == "pass" for r in results)
    return jobs.Progress(
        done=len(results),
        planned=planned,
        ended=ended,
        parts=parts,
        detail=f"{passed} passed, {sum(r['outcome'] == 'error' for r in results)} errors",
        extra={"suite": meta["suite_name"], "total_s": round(sum(r.get("client_s") or 0.0 for r in results), 3)},
    )


def _is_run(folder: Path) -> bool:
    try:
        return "suite_sha256" in read_run(folder)
    except (OSError, ValueError):
        return False


KIND = jobs.JobKind(
    name="episodes",
    module="frank.episodes.job",
    root=episodes_root,
    progress=progress,
    is_run=_is_run,
    record_files=lambda d: [d / EVENTS],
)


def launch(run_dir: Path, url: str | None = None) -> jobs.JobStatus:
    """Start (or resume) the run detached; returns at once."""
    return jobs.launch(KIND, run_dir, env={URL_ENV: url} if url else None)


def run(run_dir: Path, url: str | None = None, on_event: Callable[[dict[str, Any]], None] | None = None) -> RunOutcome:
    """Run (or resume) the run in this process, holding its lock; SIGTERM/Ctrl-C stop it cleanly."""
    stop = threading.Event()
    with jobs.JobProcess(KIND, run_dir, on_cancel=stop.set):
        return run_episodes(run_dir, url or os.environ.get(URL_ENV) or None, stop=stop, on_event=on_event)


def main(argv: list[str] | None = None) -> int:
    run_dir = jobs.main_run_dir(argv, KIND)

    def show(ev: dict[str, Any]) -> None:
        if ev["event"] in ("episode_done", "run_finished", "run_stopped", "draw_started"):
            print({k: v for k, v in ev.items() if k != "t"}, flush=True)

    outcome = run(run_dir, on_event=show)
    return 0 if outcome.status == "finished" else 3


if __name__ == "__main__":
    sys.exit(main())
