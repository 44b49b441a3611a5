"""`frank replay WORKLOAD`: replay recorded requests against the running engine, one at a time.

Progress goes to stderr (one line per request) so `--json` keeps stdout to the one summary object. Exit
status: 0 every request ok, 1 some requests failed, 3 the run was cut off (engine gone, Ctrl-C or
`frank jobs cancel`) and can be resumed with `--resume RUN`. `--detach` starts the run as a job
(frank.workloads.replay_job) and returns at once.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from frank.console.cli.common import emit, emit_record
from frank.errors import FrankError

if TYPE_CHECKING:
    from frank.workloads.record import ReplaySummary

SUMMARY_KEYS = (
    "requests",
    "failed",
    "unattributed",
    "front_end_s",
    "prefill_s",
    "queue_s",
    "ttft_s",
    "verify_step_s",
    "client_ttft_s",
    "prompt_tokens",
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("replay", help="replay a workload against the running engine, one request at a time")
    p.add_argument(
        "workload",
        nargs="?",
        help="a workload folder, a built-in (w01-mini, w01-full) or a name "
        "in the workloads dir (not needed with --resume)",
    )
    p.add_argument("--draws", nargs="+", metavar="DRAW", help="draws to replay (default: all)")
    p.add_argument(
        "--mode",
        choices=["engine", "full"],
        default="engine",
        help="engine: one output token per request; full: the recorded parameters, streamed",
    )
    p.add_argument("--limit", type=int, default=None, help="only the first N requests of each draw")
    p.add_argument("--max-tokens", type=int, default=None, help="full mode: cap the recorded max_tokens")
    p.add_argument("--no-stream", action="store_true", help="engine mode: ask for non-streamed responses")
    p.add_argument("--url", default=None, help="engine base URL (default: the running engine's)")
    p.add_argument("--model", default=None, help="served model name (default: the engine's)")
    p.add_argument("--api-key", default=None, help="bearer key (default: $FRANK_API_KEY, $OPENAI_API_KEY)")
    p.add_argument("--out", type=Path, default=None, help="run folder (default: runs dir / replays / RUN_ID)")
    p.add_argument(
        "--resume",
        metavar="RUN",
        default=None,
        help="continue a run (its id or folder): requests already recorded ok are skipped",
    )
    p.add_argument(
        "--restart",
        action="store_true",
        help="with --resume: replay unfinished draws from their first request (records are kept)",
    )
    p.add_argument(
        "--detach",
        action="store_true",
        help="run as a job in its own session (survives the terminal); prints run_id and pid at once",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_replay)


def _engine_url() -> str:
    from frank.engine.controller import EngineController

    st = EngineController().status()
    if st.state != "ready" or not st.url:
        raise FrankError(f"no engine is ready (state: {st.state}); start one with `frank engine start` or pass --url")
    return st.url


def _human(summary: ReplaySummary) -> str:
    lines = [f"run {summary.run_id}  ({summary.state}, {summary.mode} mode)  {summary.run_dir}"]
    lines.append(f"{'draw':<12}" + "".join(f"{k:>15}" for k in SUMMARY_KEYS))
    for name, d in summary.draws.items():
        cells = []
        for k in SUMMARY_KEYS:
            v = getattr(d, k)
            cells.append(f"{'-' if v is None else (f'{v:.4f}' if isinstance(v, float) else v):>15}")
        lines.append(f"{name:<12}" + "".join(cells))
    if summary.error:
        lines.append(summary.error)
    return "\n".join(lines)


def cmd_replay(args: argparse.Namespace) -> int:
    from frank.workloads import replay_job
    from frank.workloads.replay import ReplayOptions, resolve_run_dir

    api_key = args.api_key or os.environ.get("FRANK_API_KEY") or os.environ.get("OPENAI_API_KEY")
    if not api_key and not args.url:
        from frank.engine.controller import EngineController

        api_key = EngineController().client_api_key  # the running engine's own key (llama.cpp: its token)
    if args.resume:
        run_dir = resolve_run_dir(args.resume)
        if args.restart and args.detach:
            raise FrankError("--restart runs in the foreground only (drop --detach)")
    else:
        if not args.workload:
            raise FrankError("frank replay: give a WORKLOAD (or --resume RUN)")
        options = ReplayOptions(
            mode=args.mode,
            stream=not args.no_stream,
            draws=tuple(args.draws) if args.draws else None,
            limit=args.limit,
            max_tokens=args.max_tokens,
            model=args.model,
            api_key=api_key,
        )
        run_dir = replay_job.prepare(args.workload, options, args.url or _engine_url(), args.out)
    if args.detach:
        st = replay_job.launch(run_dir, api_key)
        emit(
            args.json,
            {**st.to_json(), "log": str(run_dir / "job.log")},
            lambda p: (
                f"replay {p['run_id']} started (pid {p['pid']}); it survives this terminal.\n"
                f"follow it: frank jobs status {p['run_id']} --follow   cancel: frank jobs cancel {p['run_id']}"
            ),
        )
        return 0
    summary = replay_job.run(
        run_dir,
        base_url=args.url,
        api_key=api_key,
        progress=replay_job.progress_lines(sys.stderr, args.quiet),
        restart=args.restart,
    )
    emit_record(args.json, summary, _human)
    from frank.console.cli.campaign_cmd import watch_after_run

    watch_after_run()  # the campaign's revert watch: a fired rule shows now
    if summary.state != "finished":
        return 3
    return 1 if summary.totals.failed else 0
