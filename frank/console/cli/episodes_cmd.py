"""`frank episodes check|run|list|status|report`: graded agent episodes run live against the engine.

`run` exits 0 when every planned episode has finished (whatever its outcome), 3 when the run stopped early
(the engine stopped answering, or Ctrl-C / SIGTERM): `run --resume RUN` continues at the first unfinished
episode. A suite with an error exits 1 before anything runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frank.console.cli.common import emit, emit_record
from frank.errors import FrankError

if TYPE_CHECKING:
    from frank.episodes.runner import EpisodesReport, RunOutcome


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ep = sub.add_parser("episodes", help="graded agent episodes (task suites) run live against the engine")
    esub = ep.add_subparsers(dest="episodes_command", metavar="ACTION", required=True)

    check = esub.add_parser("check", help="validate a suite; --references also proves every grader")
    check.add_argument("suite", help="a suite manifest or a built-in name (w01-mini, w01-full)")
    check.add_argument(
        "--references",
        action="store_true",
        help="grade each task's reference solution (pass expected) and untouched workspace (fail expected)",
    )
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=cmd_check)

    run = esub.add_parser("run", help="run draws of a suite against the running engine (or resume a run)")
    run.add_argument("suite", nargs="?", help="a suite manifest or a built-in name")
    run.add_argument("--draws", type=int, default=1, help="draws; one draw runs every task once (default 1)")
    run.add_argument("--resume", metavar="RUN", help="continue a run at its first unfinished episode")
    run.add_argument(
        "--sampling-seed",
        type=int,
        default=None,
        metavar="N",
        help="the engine's sampling seed on every request, for a repeatable run (default: none)",
    )
    run.add_argument("--url", default=None, help="engine base URL (default: the running engine's)")
    run.add_argument("--out", type=Path, default=None, help="run folder (default: the runs dir)")
    run.add_argument("--detach", action="store_true", help="run in the background (own session); returns at once")
    run.add_argument("--json", action="store_true")
    run.set_defaults(func=cmd_run)

    ls = esub.add_parser("list", help="episode runs, with totals")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)

    st = esub.add_parser("status", help="a run's live state: the episode running, its turn and last tool call")
    st.add_argument("run")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_status)

    rep = esub.add_parser("report", help="a run's episodes and per-draw totals")
    rep.add_argument("run")
    rep.add_argument("--json", action="store_true")
    rep.set_defaults(func=cmd_report)


def cmd_check(args: argparse.Namespace) -> int:
    from frank.episodes.grade import check_references
    from frank.episodes.suite import check_suite, resolve_suite

    path = resolve_suite(args.suite)
    suite, errors = check_suite(path)
    payload: dict[str, Any] = {
        "suite": str(path),
        "ok": not errors,
        "errors": [str(e) for e in errors],
        "tasks": [t.id for t in suite.tasks] if suite else [],
        "version": suite.version if suite else None,
    }
    if suite is not None and args.references:
        checks = check_references(suite)
        payload["references"] = [c.to_json() for c in checks]
        payload["ok"] = all(c.ok for c in checks)
    if args.json:
        emit(True, payload)
    elif errors:
        for e in errors:
            print(e, file=sys.stderr)
        print(f"frank: {len(errors)} error(s) in {path}; nothing was run", file=sys.stderr)
    else:
        lines = [f"{path}: ok ({len(payload['tasks'])} tasks)"]
        for c in payload.get("references", []):
            tried = c["adversarial"]
            failed = sum(a["outcome"] == "fail" for a in tried)
            lines.append(
                f"  {c['task']:<20} reference {c['reference']:<5} untouched {c['untouched']:<5} "
                f"adversarial {failed}/{len(tried)} fail  "
                f"{'ok' if c['ok'] else 'WRONG: ' + c['reference_detail'] + ' / ' + c['untouched_detail']}"
            )
            for a in tried:
                if not a["ok"]:
                    lines.append(
                        f"    attempt {a['attempt']}: {a['outcome']} ({a['detail']}), expected fail: {a['expect']}"
                    )
        print("\n".join(lines))
    return 0 if payload["ok"] else 1


def cmd_run(args: argparse.Namespace) -> int:
    from frank.episodes import job
    from frank.episodes.harness import EpisodeSettings
    from frank.episodes.runner import create_run, report, run_path

    if args.resume:
        if args.sampling_seed is not None:
            raise FrankError("frank episodes run --resume: the run keeps its own settings (no --sampling-seed)")
        folder = run_path(args.resume)
    elif args.suite:
        from frank.episodes.suite import load_suite
        from frank.episodes.target import engine_target

        load_suite(args.suite)  # a bad suite, then no engine to run on: refused before a run folder exists
        engine_target(args.url)
        folder = create_run(args.suite, args.draws, EpisodeSettings(sampling_seed=args.sampling_seed), out=args.out)
    else:
        raise FrankError("frank episodes run: give a SUITE (or --resume RUN)")
    if args.detach:
        st = job.launch(folder, args.url)
        emit(
            args.json,
            {"run_id": folder.name, "folder": str(folder), "pid": st.pid, "state": st.state, "detached": True},
            lambda p: (
                f"episodes run {p['run_id']} started in the background (pid {p['pid']}); "
                f"follow it with `frank episodes status {p['run_id']}`"
            ),
        )
        return 0

    def on_event(ev: dict[str, Any]) -> None:
        if not args.json and ev["event"] == "episode_done":
            print(
                f"draw {ev['draw']} {ev['task']:<20} {ev['outcome']:<5} {ev['client_s'] or 0:8.2f} s "
                f"{ev['turns']} turns {ev['tool_calls']} tool calls ({ev.get('tool_call_mode')}, "
                f"{ev.get('invalid_answers') or 0} refused) {ev['requests']} requests",
                file=sys.stderr,
            )

    outcome = job.run(folder, args.url, on_event)
    rep = report(folder)
    payload = rep.to_json() | {"status": outcome.status, "reason": outcome.reason, "ran": outcome.ran}
    emit(args.json, payload, lambda _: _human_report(rep, outcome))
    return 0 if outcome.status == "finished" else 3


def _human_report(p: EpisodesReport, ended: RunOutcome | None = None) -> str:
    lines = [
        f"run {p.run_id} ({p.suite}): {p.episodes_done}/{p.episodes_planned} episodes"
        + (f", {ended.status}: {ended.reason}" if ended is not None and ended.reason else "")
    ]
    lines.append(
        f"  {'DRAW':>4} {'TASK':<20} {'OUTCOME':<7} {'CLIENT_S':>9} {'REQ':>4} {'PROMPT':>8} "
        f"{'COMPL':>6} {'TURNS':>5} {'TOOLS':>5} {'REFUSED':>7}"
    )
    for e in p.episodes:
        lines.append(
            f"  {e['draw']:>4} {e['task']:<20} {e['outcome']:<7} {e['client_s'] or 0:>9.2f} "
            f"{e['requests'] or 0:>4} {e['prompt_tokens'] or 0:>8} {e['completion_tokens'] or 0:>6} "
            f"{e['turns'] or 0:>5} {e['tool_calls'] or 0:>5} {e.get('invalid_answers') or 0:>7}"
        )
    for d in p.draws:
        lines.append(f"  draw {d['draw']}: total {d['total_s']:.2f} s, passed {d['passed']} of {d['episodes']}")
    modes = ", ".join(p.tool_call_modes) or "-"
    lines.append(f"  tool calls: {p.tool_calls} ({modes}), refused answers: {p.invalid_answers}")
    lines.append(f"  recording: {p.recording}")
    return "\n".join(lines)


def cmd_list(args: argparse.Namespace) -> int:
    from frank.episodes.runner import list_runs

    runs = list_runs()

    def human(p: dict[str, Any]) -> str:
        lines = [f"{'RUN':<44} {'STATUS':<11} {'DONE':>9} {'TOTAL_S':>9} {'PASSED':>6}"]
        for r in p["runs"]:
            lines.append(
                f"{r['run_id']:<44} {r['status']:<11} {str(r['done']) + '/' + str(r['planned']):>9} "
                f"{r['total_s']:>9.2f} {r['passed']:>6}"
            )
        return "\n".join(lines)

    emit(args.json, {"runs": runs}, human)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from frank.episodes.runner import load_state

    state = load_state(args.run).to_json()

    def human(s: dict[str, Any]) -> str:
        lines = [
            f"run {s['run_id']} ({s['suite']}): {s['status']}, {s['done']}/{s['planned']} episodes"
            + (f" ({s['reason']})" if s["reason"] else "")
        ]
        cur = s["current"]
        if cur:
            lines.append(
                f"  now: draw {cur['draw']} {cur['task']}, turn {cur['turn']}, last tool "
                f"{cur['last_tool'] or '-'}, {cur['elapsed_s']:.0f} s"
            )
        for d in s["draws"]:
            lines.append(
                f"  draw {d['draw']}: {d['episodes']} episodes, total {d['total_s']:.2f} s, passed {d['passed']}"
            )
        return "\n".join(lines)

    emit(args.json, state, human)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from frank.episodes.runner import report

    emit_record(args.json, report(args.run), _human_report)
    return 0
