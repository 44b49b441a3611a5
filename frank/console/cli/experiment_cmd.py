"""`frank experiment register|run|status|report|analyze|plan|screen|noise|list`: registered experiments from the shell.

`run` works in the foreground, or with `--detach` as its own session (stdin from /dev/null, output to the
run folder's job.log, through frank.jobs), which is how the console launches it: an SSH drop then touches nothing, and
`status --follow` (or the console) follows the journal. The runner ignores SIGHUP either way.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frank import paths
from frank.console.cli.common import emit, emit_record
from frank.errors import FrankError
from frank.experiments import exact, registry

if TYPE_CHECKING:
    from frank.experiments.analysis import ExperimentReport
    from frank.experiments.board import ExperimentState
from frank.experiments.design import load_design
from frank.experiments.journal import read_events


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    exp = sub.add_parser("experiment", help="registered experiments: frozen designs, randomized engine starts")
    esub = exp.add_subparsers(dest="experiment_command", metavar="ACTION", required=True)

    reg = esub.add_parser("register", help="freeze a design, draw its order, print run id, hash and order")
    reg.add_argument("design", help="design file (TOML); see docs/experiments.md")
    reg.add_argument("--seed", type=int, default=None, help="draw the order from this seed (default: a random one)")
    reg.add_argument(
        "--campaign",
        default=None,
        help="record the part of this campaign that names the design (default: campaign.toml in the config dir)",
    )
    reg.add_argument("--json", action="store_true")
    reg.set_defaults(func=cmd_register)

    run = esub.add_parser("run", help="execute (or resume) a registered run in its frozen order")
    run.add_argument("run_id")
    run.add_argument(
        "--detach", action="store_true", help="run as a job in its own session; output to the run folder's job.log"
    )
    run.add_argument(
        "--stop-after",
        type=float,
        metavar="S",
        help="start no cell after S seconds: stop between cells (reason time_limit); a later run resumes",
    )
    run.add_argument(
        "--fleet", help="a hosts design's fleet file (default: FRANK_FLEET, else fleet.toml in frank's config dir)"
    )
    run.add_argument("--json", action="store_true")
    run.set_defaults(func=cmd_run)

    status = esub.add_parser("status", help="the live state of a run (current cell, per-block values, tally)")
    status.add_argument("run_id")
    status.add_argument("-f", "--follow", action="store_true", help="print journal events until the runner ends")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)

    report = esub.add_parser("report", help="effect per block, exact p-value, decision under the frozen rule")
    report.add_argument("run_id")
    report.add_argument(
        "--html",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="write one self-contained HTML page with plots (default: report.html in the run folder)",
    )
    report.add_argument(
        "--csv",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="write the run's values as the CSV `frank experiment analyze` reads, with the run id and design "
        "sha256 as comments (default: results.csv in the run folder); campaign evidence can name it",
    )
    report.add_argument("--json", action="store_true")
    report.set_defaults(func=cmd_report)

    analyze = esub.add_parser("analyze", help="apply a design's rule to measures taken elsewhere (CSV)")
    analyze.add_argument("design", help="design file (TOML)")
    analyze.add_argument("results", help="CSV: start_order, block, arm, value[, measure]")
    analyze.add_argument(
        "--html",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="write one self-contained HTML page with plots (default: NAME-report.html here)",
    )
    analyze.add_argument("--json", action="store_true")
    analyze.set_defaults(func=cmd_analyze)

    pl = esub.add_parser("plan", help="power of a design's test for an effect, from measured noise (A/A run)")
    pl.add_argument("design", help="design file (TOML)")
    noise = pl.add_mutually_exclusive_group(required=True)
    noise.add_argument("--noise", metavar="RUN", help="an A/A run id: the spread of its block effects")
    noise.add_argument("--spread-pct", type=float, metavar="S", help="spread of block effects (std dev, %%)")
    pl.add_argument(
        "--effect-pct",
        type=float,
        required=True,
        metavar="X",
        help="the true effect to confirm, %% in the rule's direction",
    )
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(func=cmd_plan)

    scr = esub.add_parser(
        "screen",
        help="screen candidate settings against a control (registered, drawn order, runs as a job); its "
        "report picks one and writes the confirmation design",
        description=SCREEN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    scr.add_argument("screen", nargs="?", help="screen file (TOML): register it and run it")
    scr.add_argument("--report", metavar="RUN|FILE.json", help="the pick of a screen run, or of an exported record")
    scr.add_argument("--export", metavar="FILE.json", help="with --report RUN: write the self-contained record")
    scr.add_argument("--design-out", metavar="FILE.toml", help="with --report: write the confirmation design")
    scr.add_argument("--html", metavar="FILE.html", help="with --report: the report as a page with its plot")
    scr.add_argument("--seed", type=int, default=None, help="draw the order from this seed (default: a random one)")
    scr.add_argument("--register-only", action="store_true", help="register it; run it later with `experiment run`")
    scr.add_argument("--detach", action="store_true", help="run as a detached job (follow it in the console)")
    scr.add_argument("--stop-after", type=float, default=None, metavar="S", help="start no cell after S seconds")
    scr.add_argument("--json", action="store_true")
    scr.set_defaults(func=cmd_screen)

    study = esub.add_parser(
        "noise",
        help="a noise study: how much of a measure's spread is step to step, request to request, start to start "
        "(registered, drawn order, runs as a job); its report shows how the spread shrinks with requests a cell",
        description=NOISE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    study.add_argument("design", nargs="?", help="design file (an A/A design, say): register it and run it")
    study.add_argument("--report", metavar="RUN", help="the noise study of a run (any run that replayed a workload)")
    study.add_argument(
        "--html",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="with --report: write the report as one HTML page with its plot (default: noise.html in the run folder)",
    )
    study.add_argument(
        "--effect-pct",
        type=float,
        default=None,
        metavar="X",
        help="the effect the report plans blocks for, %% (default: the study's, else 3)",
    )
    study.add_argument("--seed", type=int, default=None, help="draw the order from this seed (default: a random one)")
    study.add_argument("--register-only", action="store_true", help="register it; run it later with `experiment run`")
    study.add_argument("--detach", action="store_true", help="run as a detached job; it writes the report when done")
    study.add_argument("--stop-after", type=float, default=None, metavar="S", help="start no cell after S seconds")
    study.add_argument("--json", action="store_true")
    study.set_defaults(func=cmd_noise, fleet=None)

    lst = esub.add_parser("list", help="registered runs")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=cmd_list)


# -- register -------------------------------------------------------------------------------------------


def cmd_register(args: argparse.Namespace) -> int:
    from frank.campaign.actions import part_of_design  # not at the CLI's start: it reads every report module

    run = registry.register(args.design, seed=args.seed, part=part_of_design(args.design, args.campaign))
    order = run.meta.get("order") or {}
    payload = {
        "run_id": run.run_id,
        "folder": str(run.folder),
        "name": run.design.name,
        "kind": run.design.kind,
        "design_sha256": run.meta["design_sha256"],
        "source_sha256": run.meta["source_sha256"],
        "seed": order.get("seed"),
        "method": order.get("method"),
        "order_index": order.get("index"),
        "order_count": order.get("count"),
        "order": order.get("slots", []),
        "null_size": run.meta["null_size"],
        "smallest_p": run.meta["smallest_p"],
        "part": run.meta.get("part"),
        "smallest_p_fraction": exact.fraction(run.meta["smallest_p"], run.meta["null_size"])
        if run.meta["smallest_p"]
        else None,
    }
    emit(args.json, payload, _human_register)
    return 0


def _order_text(slots: list[dict[str, Any]]) -> str:
    return " ".join(f"{s['start']}:{s['arm']}" + (f"(b{s['block']})" if s.get("block") else "") for s in slots)


def _human_register(p: dict[str, Any]) -> str:
    lines = [f"registered {p['run_id']}", f"  design sha256  {p['design_sha256']}"]
    if p["part"]:
        lines.append(f"  campaign part  {p['part']}")
    if p["order"]:
        lines += [
            f"  seed           {p['seed']} ({p['method']})",
            f"  order          #{p['order_index']} (0-based) of {p['order_count']}: {_order_text(p['order'])}",
            f"  smallest p     {p['smallest_p_fraction']} = {p['smallest_p']:.4g}",
            f"  run it         frank experiment run {p['run_id']} --detach",
        ]
    else:
        lines.append(
            "  external design: its measures come from elsewhere; apply its rule with "
            "`frank experiment analyze DESIGN.toml RESULTS.csv`"
        )
    return "\n".join(lines)


# -- run ------------------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    run = registry.load_run(args.run_id)  # refuses an altered frozen copy before anything starts
    if args.stop_after is not None and args.stop_after <= 0:
        raise FrankError(f"--stop-after: expected seconds > 0, got {args.stop_after:g}")
    stop_by = time.time() + args.stop_after if args.stop_after is not None else None
    if args.fleet:
        from frank.fleet.fleetfile import FLEET_ENV

        os.environ[FLEET_ENV] = str(Path(args.fleet).resolve())  # a detached runner inherits it
    if args.detach:
        return _detach(run, args.json, stop_by)
    from frank.experiments.placement import executor_for
    from frank.experiments.runner import run_experiment

    def show(event: dict[str, Any]) -> None:
        if args.json:
            return
        try:
            print(_event_line(event), flush=True)
        except OSError:
            pass  # the terminal went away (SSH drop): the journal is the record, keep going

    result = run_experiment(run, executor_for(run), on_event=show, handle_signals=True, stop_by=stop_by)
    from frank.console.cli.campaign_cmd import watch_after_run

    watch_after_run()  # the campaign's revert watch: a fired rule shows now
    emit(
        args.json,
        {"run_id": run.run_id, "reason": result.reason, "message": result.message, "cells_run": result.cells_run},
        lambda p: f"runner stopped: {p['reason']} ({p['message']}); {p['cells_run']} cells run this time",
    )
    return 0 if result.reason == "finished" else 3


def _detach(run: registry.Run, as_json: bool, stop_by: float | None = None) -> int:
    from frank.experiments import job

    st = job.launch(run, stop_by)
    emit(
        as_json,
        {**st.to_json(), "log": str(run.log_path), "journal": str(run.journal_path)},
        lambda p: (
            f"runner started (pid {p['pid']}), log {p['log']}\n"
            f"follow it: frank experiment status {p['run_id']} --follow"
        ),
    )
    return 0


def _num(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _event_line(e: dict[str, Any]) -> str:
    kind = e.get("event", "?")
    where = f"start {e['slot'] + 1}" if "slot" in e else ""
    extra = {
        "cell_started": lambda: (
            f"{e.get('arm')}"
            + (f" (block {e['block']})" if e.get("block") else "")
            + f" attempt {e.get('attempt')} knobs {e.get('knobs')}"
        ),
        "engine_ready": lambda: f"pid {e.get('pid')} ready in {e.get('ready_s')} s",
        "replay_done": lambda: f"{e.get('requests')} requests, {e.get('failed')} failed",
        "episodes_done": lambda: f"{e.get('episodes')} episodes, {e.get('passed')} passed, {e.get('errors')} errors",
        "engine_stopped": lambda: str(e.get("reason", "")),
        "fidelity_done": lambda: " ".join(f"{k} {_num(v)}" for k, v in (e.get("kl") or {}).items()),
        "fidelity_unavailable": lambda: str(e.get("reason", "")),
        "cell_done": lambda: f"value {e.get('value'):.6g}" if isinstance(e.get("value"), (int, float)) else "",
        "cell_failed": lambda: str(e.get("error", "")),
        "cell_interrupted": lambda: str(e.get("reason", "")),
        "block_voided": lambda: f"block {e.get('block')}: {e.get('reason')}",
        "decided": lambda: f"{str(e.get('verdict')).upper()} after {e.get('unit')} {e.get('after')}: {e.get('reason')}",
        "runner_started": lambda: f"pid {e.get('pid')}" + (" (resuming)" if e.get("resumed") else ""),
        "runner_stopped": lambda: f"{e.get('reason')}: {e.get('message', '')}",
        "registered": lambda: f"{e.get('design_sha256', '')[:12]}…",
    }.get(kind, lambda: "")()
    return f"{e.get('t', '')}  {kind:<16} {where:<9} {extra}".rstrip()


# -- status, report, analyze, list --------------------------------------------------------------------


def _human_state(s: ExperimentState) -> str:
    lines = [
        f"{s.run_id}  {s.name}  {s.status}"
        + (f" (runner pid {s.runner_pid})" if s.runner_pid else "")
        + (f", last stop: {s.stopped_reason}" if s.stopped_reason and s.status != "running" else "")
    ]
    cur = s.current
    if cur:
        lines.append(f"  now: start {cur.start} {cur.arm} (block {cur.block}), attempt {cur.attempts}, {cur.phase}")
    for c in s.cells:
        value = "" if c.value is None else f"{c.value:.6g}"
        lines.append(
            f"  start {c.start:>2}  block {c.block if c.block is not None else '-':>2}  "
            f"{c.arm:<16} {c.status:<11} {value}"
        )
    if s.kind == "blocks":
        for b in s.blocks:
            eff = "" if b.effect_pct is None else f"{b.effect_pct:+.2f}%"
            lines.append(f"  block {b.block}: {eff} {'void' if b.voided else (b.sign or '')}")
        p = "" if s.p_value is None else f", p so far {s.p_value:.4g}"
        lines.append(f"  tally: {s.wins} wins, {s.losses} losses, {s.ties} ties, {s.remaining} to go{p}")
    best = s.best_possible_p
    lines.append(
        f"  rule can still be met: {'yes' if s.can_still_meet else 'no'}"
        + (f" (best possible p {best:.4g})" if best is not None else "")
    )
    if s.decided:
        d = s.decided
        lines.append(
            f"  stopped when decided: {d['verdict'].upper()} after {d['unit']} {d['after']} of {d['of']} "
            f"({d['left']} not run): {d['reason']}"
        )
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    run = registry.load_run(args.run_id, verify=False)
    if args.follow:
        from frank.jobs import lock_holder

        seen = 0
        idle_since = time.monotonic()
        while True:
            events = read_events(run.journal_path)
            for event in events[seen:]:
                print(json.dumps(event, sort_keys=True) if args.json else _event_line(event), flush=True)
            seen = len(events)
            if lock_holder(run.lock_path) is None:
                if time.monotonic() - idle_since > 3:  # give a freshly detached runner time to take the lock
                    break
            else:
                idle_since = time.monotonic()
            time.sleep(0.5)
        if args.json:
            return 0
    from frank.experiments.board import load_state

    emit_record(args.json, load_state(run), _human_state)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from frank.experiments.report import report_for_run
    from frank.experiments.report_text import format_report

    run = registry.load_run(args.run_id, verify=False)
    if run.meta.get("kind") == "screen":  # a screen picks; it has no rule to decide (frank experiment screen)
        if args.csv is not None or args.html is not None:
            raise FrankError(f"{run.run_id} is a screen: `frank experiment screen --report RUN --export|--html`")
        from frank.experiments import screen_report

        emit_record(args.json, screen_report.record_for_run(run), screen_report.format_record)
        return 0
    if args.csv is not None:
        return _write_csv(run, Path(args.csv) if args.csv else run.folder / "results.csv", args.json)
    report = report_for_run(run)
    if args.html is not None:
        return _write_html(report, Path(args.html) if args.html else run.folder / "report.html", args.json)
    emit_record(args.json, report, format_report)
    return 0


def _write_csv(run: Any, path: Path, as_json: bool) -> int:
    from frank.experiments.results_csv import results_csv_for_run

    text = results_csv_for_run(run)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    emit(
        as_json,
        {"csv": str(path), "run_id": run.run_id, "design_sha256": run.design.sha256},
        lambda p: f"wrote {p['csv']} (run {p['run_id']}, design {p['design_sha256'][:12]}…)",
    )
    return 0


def _write_html(report: ExperimentReport, path: Path, as_json: bool) -> int:
    from frank.experiments.html import experiment_page
    from frank.reports.page import write_page

    write_page(path, experiment_page(report))
    emit(
        as_json,
        {"html": str(path), "decision": report.verdict, "design_sha256": report.design_sha256},
        lambda p: f"wrote {p['html']} ({p['decision']})",
    )
    return 0


SCREEN_HELP = """\
The campaign's first step: many settings, short cells, one pick, then a registered confirmation.

  frank experiment screen SCREEN.toml [--detach] [--stop-after S]   register, then run (resume: experiment run RUN)
  frank experiment screen --report RUN [--export F.json] [--design-out F.toml] [--html F.html]
  frank experiment screen --report F.json                           decide the pick again from a record

A screen file names a profile, a [control] setting, candidates ([[candidates]] tables with knobs on top of
the control's, or a [grid] of knob values), repeats (each repeat runs every setting once, in a drawn order),
a [workload] and [measure] as a design has, a [pick] rule (min_wins: beat the control in at least that
many repeats; the best median of those goes forward) and [confirm] (effect_pct, min_blocks, max_blocks,
stop_when_decided). The report's confirmation design is the pick against the control, its blocks planned
on the screen's own spread. A screen is never evidence: register and run the confirmation.
"""


def cmd_screen(args: argparse.Namespace) -> int:
    from frank.experiments import screen_report
    from frank.experiments.registry import register_screen

    if args.report:
        ref = Path(args.report)
        if ref.suffix == ".json":  # a record file (the bounded reader refuses what is not one)
            rec = screen_report.read_record(ref)
        else:
            rec = screen_report.record_for_run(registry.load_run(args.report))
        if args.design_out and not rec.confirmation:
            raise FrankError(f"{args.report}: no pick ({rec.result.pick_reason}): no confirmation design")
        if args.export:
            screen_report.write_json(Path(args.export), rec)  # a file that is there is never overwritten
        if args.design_out and rec.confirmation:
            out = Path(args.design_out)
            out.parent.mkdir(parents=True, exist_ok=True)
            paths.write_new(out, rec.confirmation.design_toml)  # nor a design the user may have edited
        if args.html:
            from frank.experiments.html import screen_page
            from frank.reports.page import write_page

            write_page(Path(args.html), screen_page(rec.to_json()))
        emit_record(args.json, rec, screen_report.format_record)
        return 0
    if not args.screen:
        raise FrankError("frank experiment screen: give a screen file to run, or --report RUN|FILE.json")
    run = register_screen(args.screen, seed=args.seed)
    if args.register_only:
        order = run.meta.get("order") or {}
        emit(
            args.json,
            {"run_id": run.run_id, "screen_sha256": run.design.sha256, "order": order.get("slots", [])},
            lambda p: f"registered screen {p['run_id']}\n  order {_order_text(p['order'])}",
        )
        return 0
    args.run_id = run.run_id
    return cmd_run(args)


NOISE_HELP = """\
Where a measure's start-to-start spread comes from (docs/experiments.md, "The noise study").

  frank experiment noise DESIGN.toml [--detach] [--stop-after S] [--effect-pct X]   register, then run
  frank experiment noise --report RUN [--html [PATH]] [--effect-pct X] [--json]      the study of any run

A design's run (an A/A design: both arms the same settings) is decomposed into step to step within a
request, request to request within a start and start to start within a setting, with each level's share of
a step and of a start's value; the report shows how the between-start spread, the one `frank experiment plan`
takes, shrinks with the requests measured a cell and with the first requests dropped (the mean and, for time
per verify step, the median of steps), the blocks the plan then asks for X%, and the rig beside each start.
A detached study writes noise.json, noise.txt and noise.html into its run folder when it finishes.
"""


def cmd_noise(args: argparse.Namespace) -> int:
    from frank.experiments import noise_report as nr

    if args.effect_pct is not None and not args.effect_pct > 0:
        raise FrankError(f"--effect-pct {args.effect_pct:g}: expected a positive percent")
    if args.report:
        run = registry.load_run(args.report, verify=False)
        report = nr.noise_report(run, args.effect_pct)
        if args.html is not None:
            from frank.experiments.html import noise_page
            from frank.reports.page import write_page

            path = Path(args.html) if args.html else run.folder / "noise.html"
            write_page(path, noise_page(report.to_json()))
            if not args.json:
                print(f"wrote {path}")
        emit_record(args.json, report, nr.format_noise)
        return 0
    if not args.design:
        raise FrankError("frank experiment noise: give a design file to run, or --report RUN")
    if args.html is not None:
        raise FrankError("--html goes with --report RUN (a detached study writes noise.html into its run folder)")
    run = registry.register(args.design, seed=args.seed)
    nr.mark_study(run, args.effect_pct if args.effect_pct is not None else nr.DEFAULT_EFFECT_PCT)
    if args.register_only:
        order = run.meta.get("order") or {}
        emit(
            args.json,
            {"run_id": run.run_id, "design_sha256": run.design.sha256, "order": order.get("slots", [])},
            lambda p: (
                f"registered noise study {p['run_id']}\n  order {_order_text(p['order'])}\n"
                f"  run it         frank experiment run {p['run_id']} --detach"
            ),
        )
        return 0
    if args.stop_after is not None and args.stop_after <= 0:
        raise FrankError(f"--stop-after: expected seconds > 0, got {args.stop_after:g}")
    stop_by = time.time() + args.stop_after if args.stop_after is not None else None
    if args.detach:
        return _detach(run, args.json, stop_by)
    from frank.experiments.placement import executor_for
    from frank.experiments.runner import run_experiment

    def show(event: dict[str, Any]) -> None:
        if not args.json:
            try:
                print(_event_line(event), flush=True)
            except OSError:
                pass

    result = run_experiment(run, executor_for(run), on_event=show, handle_signals=True, stop_by=stop_by)
    if result.reason != "finished":
        emit(
            args.json,
            {"run_id": run.run_id, "reason": result.reason, "message": result.message, "cells_run": result.cells_run},
            lambda p: f"runner stopped: {p['reason']} ({p['message']}); resume: frank experiment run {p['run_id']}",
        )
        return 3
    report = nr.noise_report(run)
    files = nr.write_files(run, report)
    if not args.json:
        print(f"wrote {files['text']}, {files['json']} and {files['html']}")
    emit_record(args.json, report, nr.format_noise)
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from frank.experiments.analysis import analyze
    from frank.experiments.report_text import format_report
    from frank.experiments.results_csv import read_results_csv

    design = load_design(args.design)
    report = analyze(design, read_results_csv(args.results, design), source="external")
    report = replace(report, results_csv=str(args.results))
    if args.html is not None:
        return _write_html(report, Path(args.html) if args.html else Path(f"{design.name}-report.html"), args.json)
    emit_record(args.json, report, format_report)
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from frank.experiments import plan

    design = load_design(args.design)
    if args.noise:
        spread, n, mean = plan.spread_from_run(args.noise)
        source = f"A/A run {args.noise} ({n} effects, mean {mean:+.2f}%)"
    else:
        spread, source = args.spread_pct, "given"
    result = plan.plan(design, spread, args.effect_pct, source)
    emit(args.json, result.to_json(), lambda p: plan.format_plan(result))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from frank.experiments.board import load_state

    runs = []
    for meta in registry.list_runs():
        try:
            state = load_state(registry.load_run(meta["run_id"], verify=False))
            status, done = state.status, sum(1 for c in state.cells if c.status == "done")
        except Exception as exc:  # a damaged run must not hide the others
            status, done = f"unreadable: {exc}", 0
        runs.append(
            {
                "run_id": meta["run_id"],
                "name": meta.get("name"),
                "kind": meta.get("kind"),
                "registered_at": meta.get("registered_at"),
                "design_sha256": meta.get("design_sha256"),
                "status": status,
                "cells_done": done,
                "cells": len((meta.get("order") or {}).get("slots", [])),
            }
        )
    emit(
        args.json,
        {"runs": runs},
        lambda p: (
            "\n".join(
                f"{r['run_id']}  {r['status']:<10} {r['cells_done']}/{r['cells']} cells  {r['design_sha256'][:12]}"
                for r in p["runs"]
            )
            or "no registered experiments"
        ),
    )
    return 0
