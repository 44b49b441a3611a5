"""`frank fidelity run|floor|list|report|table|sets`: teacher-forced top-64 KL against the reference
implementation."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from frank.console.cli.common import emit, parse_key_values


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fid = sub.add_parser("fidelity", help="KL of the engine's next-token distribution against the reference")
    fsub = fid.add_subparsers(dest="fidelity_command", metavar="ACTION", required=True)

    run = fsub.add_parser("run", help="measure the running engine over text sets (default: code agent prose)")
    run.add_argument("--sets", nargs="+", metavar="SET", help="shipped names, user set names or folders")
    run.add_argument("--label", default="", help="a note kept with the saved run")
    run.add_argument(
        "--detach", action="store_true", help="run as a detached job (follow: frank jobs status RUN --follow)"
    )
    run.add_argument("--json", action="store_true")
    run.set_defaults(func=cmd_run)

    floor = fsub.add_parser("floor", help="start the same configuration twice: the per-set noise floor")
    floor.add_argument("--sets", nargs="+", metavar="SET")
    floor.add_argument("--profile", default=None)
    floor.add_argument("--knob", action="append", metavar="NAME=VALUE", help="knob value (repeatable)")
    floor.add_argument(
        "--versus",
        action="append",
        metavar="NAME=VALUE",
        help="a third start with this knob changed: its KL against start 1 beside the floor (repeatable)",
    )
    floor.add_argument("--json", action="store_true")
    floor.set_defaults(func=cmd_floor)

    ls = fsub.add_parser("list", help="saved fidelity runs and floors")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)

    report = fsub.add_parser("report", help="one saved run, or a table file: per-set KL beside the floors")
    report.add_argument("run", nargs="?", help="run id or prefix (default: the latest), or a table's .json file")
    report.add_argument("--json", action="store_true")
    report.set_defaults(func=cmd_report)

    table = fsub.add_parser("table", help="a table file of several engines' floor runs (frank.fidelity.table)")
    table.add_argument("--out", required=True, help="the .json file to write")
    table.add_argument("--title", required=True)
    table.add_argument("--model", required=True, help="the model every row serves, e.g. smollm2-135m")
    table.add_argument("--reference", default="the float32 checkpoint (transformers)")
    table.add_argument("--row", action="append", metavar="LABEL=RUN", help="a row: its label and floor run id")
    table.add_argument(
        "--keep", metavar="FILE", help="the rows and seed numbers of this table file too (rows measured elsewhere)"
    )
    table.add_argument("--engine", action="append", metavar="LABEL=ENGINE", help="a row's engine (default: its kind)")
    table.add_argument(
        "--seed", action="append", metavar="LABEL=SET:KL,...", help="the seed's numbers for a row (repeatable)"
    )
    table.add_argument("--machine", default="", help="where the runs ran")
    table.add_argument("--note", action="append", help="a line under the table (repeatable)")
    table.add_argument("--json", action="store_true")
    table.set_defaults(func=cmd_table)

    sets = fsub.add_parser("sets", help="list or check text sets")
    ssub = sets.add_subparsers(dest="sets_command", metavar="ACTION", required=True)
    sls = ssub.add_parser("list", help="shipped and user text sets")
    sls.add_argument("--json", action="store_true")
    sls.set_defaults(func=cmd_sets_list)
    check = ssub.add_parser("check", help="validate a set; every error is printed as file:line: reason")
    check.add_argument("path", help="a set folder or name")
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=cmd_sets_check)


def _progress(args: argparse.Namespace) -> Callable[[str], None] | None:
    return None if args.json else (lambda line: print(f"  {line}", file=sys.stderr, flush=True))


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3e}"


def format_run(run: dict[str, Any]) -> str:
    knobs = " ".join(f"{k}={v}" for k, v in run.get("knobs", {}).items())
    lines = [
        f"{run['id']}  {run['kind']}  {run['profile']} {knobs}  top-{run['top_k']}"
        + (f"  ({run['seconds']} s)" if "seconds" in run else ""),
        f"{'SET':<10} {'KL':>10} {'FLOOR':>10} {'REF FLOOR':>10} {'ENG FLOOR':>10} {'POSITIONS':>9} {'MISSES':>7}",
    ]
    for s in run["sets"]:
        floor = s.get("floor") or {}
        lines.append(
            f"{s['name']:<10} {_fmt(s['kl']):>10} {_fmt(floor.get('value')):>10} "
            f"{_fmt(floor.get('reference')):>10} {_fmt(floor.get('engine')):>10} {s['positions']:>9} "
            f"{s['misses']:>7}"
        )
        if s.get("versus"):
            v = s["versus"]
            changed = " ".join(f"{k}={val}" for k, val in v["knobs"].items())
            ratio = v["over_engine_floor"]
            times = "-" if ratio is None else f"{ratio:.2f}"
            lines.append(f"{'':<10} {changed}: KL against start 1 {_fmt(v['kl'])} ({times} x the engine floor)")
    return "\n".join(lines)


def cmd_run(args: argparse.Namespace) -> int:
    """A fidelity run is a job (frank.fidelity.job): in the foreground it holds the run's lock, so it shows in
    `frank jobs list` and `frank jobs cancel RUN` stops it; with --detach it outlives the terminal."""
    from frank.fidelity import job
    from frank.fidelity.runs import running_target

    running_target()  # refuses at once, before a run folder exists, when no engine is ready
    run_dir = job.prepare(args.sets, args.label)
    if args.detach:
        st = job.launch(run_dir)
        emit(
            args.json,
            {"run_id": st.run_id, "pid": st.pid, "run_dir": st.run_dir},
            lambda p: f"{p['run_id']} (pid {p['pid']})",
        )
        return 0
    run = job.run(run_dir, echo=_progress(args))
    if run is None:
        print(f"frank: fidelity run {run_dir.name} cancelled; nothing saved", file=sys.stderr)
        return 3
    emit(args.json, dict(run), format_run)
    return 0


def cmd_floor(args: argparse.Namespace) -> int:
    from frank.fidelity.runs import floor_run

    run = floor_run(
        args.sets,
        profile=args.profile,
        knobs=parse_key_values(args.knob),
        progress=_progress(args),
        versus=parse_key_values(args.versus) if args.versus else None,
    )
    emit(args.json, dict(run), format_run)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from frank.fidelity.runs import list_runs

    runs = [
        {
            "id": r["id"],
            "kind": r["kind"],
            "created_at": r["created_at"],
            "profile": r["profile"],
            "knobs": r["knobs"],
            "label": r.get("label", ""),
            "sets": {s["name"]: s["kl"] for s in r["sets"]},
        }
        for r in list_runs()
    ]

    def human(p: dict[str, Any]) -> str:
        lines = [f"{'RUN':<34} {'KIND':<6} KNOBS / KL PER SET"]
        for r in p["runs"]:
            knobs = " ".join(f"{k}={v}" for k, v in r["knobs"].items())
            kls = "  ".join(f"{n} {_fmt(v)}" for n, v in r["sets"].items())
            lines.append(f"{r['id']:<34} {r['kind']:<6} {knobs}  {kls}")
        return "\n".join(lines)

    emit(args.json, {"runs": runs}, human)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from frank.errors import FrankError
    from frank.fidelity.runs import list_runs, load_run

    if args.run and args.run.endswith(".json"):
        from frank.fidelity.table import format_table, load_table

        table = load_table(Path(args.run))
        emit(args.json, table.model_dump(mode="json"), lambda _: format_table(table))
        return 0
    if args.run:
        run = load_run(args.run)
    else:
        runs = list_runs()
        if not runs:
            raise FrankError("no fidelity runs yet: `frank fidelity run`")
        run = runs[-1]
    emit(args.json, dict(run), format_run)
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    from pathlib import Path

    from frank.engine.kinds import KINDS
    from frank.engine.profiles import load_profile
    from frank.errors import FrankError
    from frank.fidelity import table as t
    from frank.fidelity.runs import load_run

    engines = parse_key_values(args.engine, "engine")
    kept = t.load_table(Path(args.keep)) if args.keep else None
    new_rows = parse_key_values(args.row, "row")
    rows = [row for row in (kept.engines if kept else []) if row.label not in new_rows]
    for label, run_id in new_rows.items():
        run = load_run(run_id)
        engine = engines.get(label) or KINDS[load_profile(run["profile"]).kind].label
        rows.append(t.engine_row(label, engine, run, args.machine))
    if not rows:
        raise FrankError("a table needs at least one row: --row LABEL=RUN or --keep FILE")
    seed = list(kept.seed) if kept and not args.seed else []
    for label, values in parse_key_values(args.seed, "seed").items():
        try:
            kl = {name: float(v) for name, v in (pair.split(":", 1) for pair in values.split(","))}
        except ValueError:
            raise FrankError(f"--seed {label}={values}: expected SET:KL,SET:KL,...") from None
        seed.append(t.SeedRow(label=label, kl=kl))
    top_k = {load_run(run_id)["top_k"] for run_id in new_rows.values()} | ({kept.top_k} if kept else set())
    if len(top_k) != 1:
        raise FrankError(f"the rows' runs measured different top k: {sorted(top_k)}")
    out = Path(args.out)
    notes = args.note if args.note is not None else list(kept.notes) if kept else []
    table = t.build_table(out, args.title, args.model, args.reference, rows, top_k.pop(), seed, notes)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(t.table_json(table))
    emit(args.json, table.model_dump(mode="json"), lambda _: t.format_table(table))
    return 0


def cmd_sets_list(args: argparse.Namespace) -> int:
    from frank.fidelity.sets import check_set, list_sets

    entries = []
    for name, path, source in list_sets():
        text_set, errors = check_set(path)
        entries.append(
            {
                "name": name,
                "path": str(path),
                "source": source,
                "documents": len(text_set.documents) if text_set else None,
                "max_tokens": text_set.max_tokens if text_set else None,
                "sha256": text_set.sha256 if text_set else None,
                "error": str(errors[0]) if errors else None,
            }
        )

    def human(p: dict[str, Any]) -> str:
        lines = [f"{'NAME':<16} {'SOURCE':<8} {'DOCS':>4} {'TOKENS':>6}  SHA256 / ERROR"]
        for e in p["sets"]:
            lines.append(
                f"{e['name']:<16} {e['source']:<8} {e['documents'] or '-':>4} {e['max_tokens'] or '-':>6}  "
                f"{e['error'] or e['sha256'][:16]}"
            )
        return "\n".join(lines)

    emit(args.json, {"sets": entries}, human)
    return 0


def cmd_sets_check(args: argparse.Namespace) -> int:
    from frank.errors import FrankError
    from frank.fidelity.sets import check_set, resolve_set

    try:
        path = resolve_set(args.path)
    except FrankError:
        from pathlib import Path

        path = Path(args.path)
    text_set, errors = check_set(path)
    payload = {
        "set": str(path),
        "ok": not errors,
        "errors": [str(e) for e in errors],
        "documents": len(text_set.documents) if text_set else None,
        "sha256": text_set.sha256 if text_set else None,
    }
    if args.json:
        emit(True, payload)
    elif errors:
        for e in errors:
            print(e, file=sys.stderr)
        print(f"frank: {len(errors)} error(s) in {path}", file=sys.stderr)
    else:
        print(f"{path}: ok ({payload['documents']} documents, sha256 {payload['sha256']})")
    return 0 if not errors else 1
