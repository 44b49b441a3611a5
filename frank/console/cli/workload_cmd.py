"""`frank workload list|check|make|import`: workloads on disk, their checks, the synthetic W01, imports."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from frank.console.cli.common import emit
from frank.errors import FrankError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    wl = sub.add_parser("workload", help="list, check, make and import workloads (recorded agent requests)")
    wsub = wl.add_subparsers(dest="workload_command", metavar="ACTION", required=True)

    ls = wsub.add_parser("list", help="built-in and user workloads")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)

    check = wsub.add_parser("check", help="validate a workload; every error is printed as file:line: reason")
    check.add_argument("workload", help="a workload folder, a built-in name or a name in the workloads dir")
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=cmd_check)

    make = wsub.add_parser("make", help="write a synthetic workload")
    make.add_argument("kind", choices=["w01"], help="what to make (w01: the seed's agent-task benchmark shape)")
    make.add_argument("--scale", choices=["full", "mini"], default="mini")
    make.add_argument("--seed", type=int, default=1)
    make.add_argument("--out", type=Path, required=True, help="the workload folder to write")
    make.add_argument("--force", action="store_true", help="overwrite an existing workload there")
    make.add_argument("--json", action="store_true")
    make.set_defaults(func=cmd_make)

    imp = wsub.add_parser("import", help="a workload from plain JSONL files of chat-completions request bodies")
    imp.add_argument("files", nargs="+", type=Path, help="one JSONL file per draw")
    imp.add_argument("--out", type=Path, default=None, help="the workload folder (default: the workloads dir / --name)")
    imp.add_argument("--name", default=None, help="workload name (default: the --out folder's name)")
    imp.add_argument("--description", default="")
    imp.add_argument("--force", action="store_true")
    imp.add_argument("--json", action="store_true")
    imp.set_defaults(func=cmd_import)


def cmd_list(args: argparse.Namespace) -> int:
    from frank.workloads.catalog import list_workloads

    entries = [dict(asdict(e), path=str(e.path)) for e in list_workloads()]

    def human(p: dict[str, Any]) -> str:
        lines = [f"{'NAME':<24} {'SOURCE':<8} {'DRAWS':>5} {'REQUESTS':>8}  DESCRIPTION"]
        for e in p["workloads"]:
            desc = e["error"] or e["description"]
            if e["source"] == "builtin" and not e["generated"]:
                desc = "(not generated yet) " + desc
            lines.append(f"{e['name']:<24} {e['source']:<8} {e['draws'] or '-':>5} {e['requests'] or '-':>8}  {desc}")
        return "\n".join(lines)

    emit(args.json, {"workloads": entries}, human)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from frank.workloads.catalog import resolve_workload
    from frank.workloads.format import check_workload

    path = resolve_workload(args.workload)
    workload, errors = check_workload(path)
    payload = {
        "workload": str(path),
        "ok": not errors,
        "errors": [str(e) for e in errors],
        "draws": {d.name: d.requests for d in workload.draws} if workload else {},
    }
    if args.json:
        emit(True, payload)
    elif errors:
        for e in errors:
            print(e, file=sys.stderr)
        print(f"frank: {len(errors)} error(s) in {path}", file=sys.stderr)
    else:
        total = sum(n or 0 for n in payload["draws"].values())
        print(f"{path}: ok ({len(payload['draws'])} draws, {total} requests)")
    return 0 if not errors else 1


def cmd_make(args: argparse.Namespace) -> int:
    import time

    from frank.workloads.format import read_manifest
    from frank.workloads.w01 import make_w01

    t0 = time.monotonic()
    path = make_w01(args.out, args.scale, args.seed, overwrite=args.force)
    workload = read_manifest(path)
    payload = {
        "workload": str(path),
        "name": workload.name,
        "scale": args.scale,
        "seed": args.seed,
        "draws": {d.name: {"requests": d.requests, "sha256": d.sha256} for d in workload.draws},
        "seconds": round(time.monotonic() - t0, 2),
    }
    emit(
        args.json,
        payload,
        lambda p: (
            f"wrote {p['workload']} ({len(p['draws'])} draws, "
            f"{sum(d['requests'] for d in p['draws'].values())} requests) in {p['seconds']} s"
        ),
    )
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from frank.paths import workloads_dir
    from frank.workloads.format import import_jsonl, read_manifest

    if args.out is None and not args.name:
        raise FrankError("frank workload import: give --out DIR or --name NAME")
    out = args.out if args.out is not None else workloads_dir() / args.name
    path = import_jsonl(args.files, out, args.name, args.description, overwrite=args.force)
    workload = read_manifest(path)
    payload = {"workload": str(path), "name": workload.name, "draws": {d.name: d.requests for d in workload.draws}}
    emit(
        args.json,
        payload,
        lambda p: f"imported {sum(p['draws'].values())} requests into {p['workload']} ({len(p['draws'])} draw(s))",
    )
    return 0
