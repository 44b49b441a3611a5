"""The `replay` job kind: one replay run folder worked on by one process, in the foreground (`frank replay`)
or detached (`frank replay --detach`, the console's menu): `python -m frank.workloads.replay_job RUN_ID`.

`prepare()` checks the workload and creates the run folder with the launch spec (job.json) before anything
is sent; `run()` holds the run's lock, replays (or resumes: requests recorded ok are skipped) and stops
cleanly on SIGTERM after the request in flight. Status comes from the run's summary.json, rewritten with
an fsync after every request; the per-request records are the draws' JSONL files.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TextIO

from frank import jobs, paths, readfile
from frank.errors import FrankError
from frank.jobs.states import JobEnd
from frank.workloads import catalog
from frank.workloads.format import load_workload
from frank.workloads.record import ReplaySummary
from frank.workloads.replay import (
    RUN_FILE,
    SUMMARY_FILE,
    ProgressFn,
    ReplayOptions,
    ReplayProgress,
    ReplayRunner,
    default_runs_root,
    resume_replay,
)

# the summary's state -> the job's (the runner says `interrupted` when the engine went away: a failure)
ENDED: dict[str, JobEnd] = {"finished": "finished", "stopped": "cancelled", "interrupted": "failed", "failed": "failed"}


def progress(run_dir: Path) -> jobs.Progress:
    try:
        summary = readfile.read_object(run_dir / SUMMARY_FILE)
    except FrankError:
        return jobs.Progress()
    parts = {
        d: (int(t.get("requests") or 0), int(t.get("planned") or 0)) for d, t in (summary.get("draws") or {}).items()
    }
    totals = summary.get("totals") or {}
    detail = f"{totals.get('ok', 0)} ok, {totals.get('failed', 0)} failed"
    if summary.get("error"):
        detail += f"; {summary['error']}"
    return jobs.Progress(
        done=sum(d for d, _ in parts.values()),
        planned=sum(p for _, p in parts.values()),
        ended=ENDED.get(str(summary.get("state"))),
        ended_at=summary.get("updated_at"),
        detail=detail,
        parts=parts,
        extra={
            "draws": summary.get("draws") or {},
            "mode": summary.get("mode"),
            "workload": (summary.get("workload") or {}).get("name"),
            "error": summary.get("error"),
        },
    )


def _is_run(folder: Path) -> bool:
    return ((folder / RUN_FILE).is_file() or (folder / jobs.JOB_FILE).is_file()) and not (
        folder / "design.toml"
    ).exists()


KIND = jobs.JobKind(
    name="replay",
    module="frank.workloads.replay_job",
    root=default_runs_root,
    progress=progress,
    is_run=_is_run,
    record_files=lambda d: sorted(d.glob("*.jsonl")),
)


def engine_url() -> str | None:
    """The running engine's URL (a resumed run goes to the engine of now, which may have a new port)."""
    from frank.engine.controller import EngineController

    st = EngineController().status(check_health=False)
    return st.url if st.state == "ready" else None


def prepare(workload: str | Path, options: ReplayOptions, base_url: str, out: Path | None = None) -> Path:
    """Check the whole workload (a built-in is generated here on first use), create the run folder and
    record what to replay in it; nothing is sent yet. Returns the run folder."""
    path = catalog.resolve_workload(workload)
    loaded = load_workload(path, options.draws)  # every error before any request
    if out is not None and (Path(out) / RUN_FILE).exists():
        raise FrankError(f"{out} already holds a replay run: resume it with --resume {out}, or pick another --out")
    runner = ReplayRunner(loaded, base_url, options, Path(out).expanduser() if out else None)
    paths.private_dir(runner.run_dir)
    spec = {
        "workload": str(path),
        "base_url": base_url,
        "options": {k: v for k, v in asdict(options).items() if k != "api_key"},
    }
    jobs.write_job_file(
        runner.run_dir, KIND.name, None, spec=spec, planned=sum(len(runner.planned(d)) for d in runner.draw_names)
    )
    return runner.run_dir


def launch(run_dir: Path, api_key: str | None = None) -> jobs.JobStatus:
    """Start (or resume) the run detached; returns at once."""
    return jobs.launch(KIND, run_dir, env={"FRANK_API_KEY": api_key} if api_key else None)


def run(
    run_dir: Path,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    progress: ProgressFn | None = None,
    restart: bool = False,
) -> ReplaySummary:
    """Replay (or resume) the run in this process, holding its lock. Returns the summary."""
    box: list[ReplayRunner] = []

    def cancel() -> None:
        if box:
            box[0].stop()

    with jobs.JobProcess(KIND, run_dir, on_cancel=cancel) as job:
        api_key = api_key or os.environ.get("FRANK_API_KEY") or None
        if (run_dir / RUN_FILE).is_file():
            runner = resume_replay(run_dir, base_url or engine_url(), progress, api_key=api_key, restart=restart)
        else:
            spec = jobs.read_job_file(run_dir).spec
            if not spec:
                raise FrankError(f"{run_dir}: no run.json and no launch spec in {jobs.JOB_FILE}")
            opts = dict(spec["options"])
            opts["draws"] = tuple(opts["draws"]) if opts.get("draws") else None
            options = ReplayOptions(**opts, api_key=api_key)
            workload = load_workload(spec["workload"], options.draws)
            runner = ReplayRunner(workload, base_url or spec["base_url"], options, run_dir, progress)
        box.append(runner)
        if job.cancelled.is_set():
            runner.stop()
        return runner.run_sync()


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}s"


def progress_lines(stream: TextIO, quiet: bool = False) -> ProgressFn:
    """One line per request and per draw on `stream` (stderr for the CLI, job.log for a detached job)."""

    def show(p: ReplayProgress) -> None:
        if quiet:
            return
        try:
            if p.phase == "result" and p.last is not None:
                rec = p.last
                server = rec.server.values if rec.server is not None else None
                if rec.ok:
                    fe = server.front_end_s if server is not None else None
                    ttft = rec.client.ttft_s if rec.client is not None else None
                    detail = (
                        f"ttft {ttft or 0:.3f}s  front-end "
                        f"{'-' if fe is None else f'{fe:.3f}s'}  prompt {rec.prompt_tokens}"
                        + ("" if rec.attributed else f"  [unattributed: {server.reason if server else 'no values'}]")
                    )
                else:
                    detail = f"FAILED: {rec.error}"
                print(f"[{p.draw} {p.done}/{p.total}] {rec.id}  {detail}", file=stream, flush=True)
            elif p.phase in ("started", "interrupted", "stopped", "failed") and p.message:
                print(p.message, file=stream, flush=True)
            elif p.phase == "draw_done" and p.totals is not None:
                t = p.totals
                print(
                    f"[{p.draw}] done: {t.ok}/{t.planned} ok, front-end "
                    f"{'n/a' if t.front_end_s is None else f'{t.front_end_s:.3f}s'}, "
                    f"prefill {_seconds(t.prefill_s)}, ttft {_seconds(t.ttft_s)}",
                    file=stream,
                    flush=True,
                )
        except OSError:
            pass  # the terminal went away: the run folder is the record, keep going

    return show


def main(argv: list[str] | None = None) -> int:
    run_dir = jobs.main_run_dir(argv, KIND)
    summary = run(run_dir, progress=progress_lines(sys.stdout))
    print(f"replay {summary.run_id}: {summary.state}", flush=True)
    return 0 if summary.state == "finished" else 3


if __name__ == "__main__":
    sys.exit(main())
