"""`frank engine start|status|stop|restart|logs|knob` and `frank profiles`: the controller's CLI twins; `frank
engine fit|floors`: the split's fit and the floors it uses (frank.engine.split_fit)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import IO, Any

from frank.console.cli.common import emit, emit_record, parse_key_values
from frank.engine import split_fit
from frank.engine.controller import EngineController, EngineStatus
from frank.engine.profiles import DEFAULT_PROFILE, ProfileError, list_profiles, load_profile

FIT_PROFILE = "exl3-gpu-moe"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    engine = sub.add_parser("engine", help="start, stop and watch the engine (vLLM or llama.cpp)")
    esub = engine.add_subparsers(dest="engine_command", metavar="ACTION", required=True)

    start = esub.add_parser("start", help="start the engine and wait until it is ready")
    start.add_argument("--profile", default=None, help=f"profile name (default {DEFAULT_PROFILE})")
    start.add_argument("--knob", action="append", metavar="NAME=VALUE", help="knob value (repeatable)")
    start.add_argument("--dry-run", action="store_true", help="print the exact command line and environment only")
    start.add_argument("--timeout", type=float, default=None, help="seconds to wait for /health")
    start.add_argument("--json", action="store_true")
    start.set_defaults(func=cmd_start)

    status = esub.add_parser("status", help="stopped, starting, ready or crashed")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)

    stop = esub.add_parser("stop", help="stop the engine (SIGTERM, then SIGKILL after the grace period)")
    stop.add_argument("--grace", type=float, default=None, help="seconds between SIGTERM and SIGKILL")
    stop.add_argument("--json", action="store_true")
    stop.set_defaults(func=cmd_stop)

    restart = esub.add_parser("restart", help="restart with the same (or new) knob values")
    restart.add_argument("--knob", action="append", metavar="NAME=VALUE")
    restart.add_argument("--json", action="store_true")
    restart.set_defaults(func=cmd_restart)

    logs = esub.add_parser("logs", help="the engine log")
    logs.add_argument("-n", "--lines", type=int, default=50)
    logs.add_argument("-f", "--follow", action="store_true")
    logs.set_defaults(func=cmd_logs)

    knob = esub.add_parser("knob", help="flip a knob: live without a restart, otherwise by restarting")
    knob.add_argument("name")
    knob.add_argument("value")
    knob.add_argument("--profile", default=None, help="profile whose saved value to set when no engine runs")
    knob.add_argument("--json", action="store_true")
    knob.set_defaults(func=cmd_knob)

    fit = esub.add_parser(
        "fit",
        help="the smallest cpu_split whose GPU memory fits a budget (exllamav3: the checkpoint and a measured floor)",
    )
    fit.add_argument("--profile", default=FIT_PROFILE, help=f"an exl3 profile (default {FIT_PROFILE})")
    fit.add_argument("--knob", action="append", metavar="NAME=VALUE", help="knob value (repeatable)")
    fit.add_argument("--budget-mib", type=float, default=None, help="plan for this much GPU memory (default: free now)")
    fit.add_argument("--context", type=int, default=None, help="the context served (default: the profile's)")
    fit.add_argument(
        "--checkpoint", default=None, help="an EXL3 checkpoint folder or headers JSON (default: the model)"
    )
    fit.add_argument("--exl3-version", default=None, help="exllamav3's version (default: the profile's python's)")
    fit.add_argument("--floor-mib", type=float, default=None, help="a floor given by hand instead of a measured one")
    fit.add_argument("--json", action="store_true")
    fit.set_defaults(func=cmd_fit)

    floors = esub.add_parser("floors", help="the GPU memory floors measured when exl3 engines became ready")
    floors.add_argument("--json", action="store_true")
    floors.set_defaults(func=cmd_floors)

    profiles = sub.add_parser("profiles", help="list engine profiles and their knobs")
    profiles.add_argument("--json", action="store_true")
    profiles.set_defaults(func=cmd_profiles)


def _human_status(st: EngineStatus) -> str:
    lines = [f"state    {st.state}"]
    if st.profile:
        lines += [
            f"profile  {st.profile}  ({_kind_label(st.kind)})",
            f"pid      {st.pid}  (group {st.pgid})",
            f"url      {st.url}",
        ]
        if st.ready_s is not None:
            lines.append(f"ready in {st.ready_s:.1f} s")
        if st.uptime_s is not None:
            lines.append(f"uptime   {st.uptime_s:.0f} s")
        knobs = ", ".join(f"{k}={v}" for k, v in sorted(st.knobs.items()))
        lines.append(f"knobs    {knobs or '-'}")
    if st.exit is not None:
        lines.append(f"exit     {st.exit.describe()}")
        lines += ["last log lines:"] + [f"  {line}" for line in st.log_tail]
    if st.warning:
        lines.append(f"warning  {st.warning}")
    lines += [f"note     {note}" for note in st.notes]
    lines.append(f"log      {st.log_path}")
    return "\n".join(lines)


def _kind_label(kind: str | None) -> str:
    from frank.engine.kinds import KINDS

    return KINDS[kind].label if kind in KINDS else str(kind)


def _progress(elapsed: float, line: str) -> None:
    sys.stderr.write(f"\r  waiting for /health: {elapsed:5.1f} s  {line[:90]:<90}")
    sys.stderr.flush()


def cmd_start(args: argparse.Namespace) -> int:
    controller = EngineController()
    knobs = parse_key_values(args.knob)
    if args.dry_run:
        spec = controller.dry_run(args.profile, knobs)
        payload = {
            "argv": spec.argv,
            "env": spec.env,
            "host": spec.host,
            "port": spec.port,
            "profile": args.profile or DEFAULT_PROFILE,
            "kind": load_profile(args.profile or DEFAULT_PROFILE).kind,
            "notes": list(spec.notes),
        }
        emit(
            args.json,
            payload,
            lambda p: (
                "".join(f"note: {n}\n" for n in p["notes"])
                + "env:\n"
                + "".join(f"  {k}={v}\n" for k, v in sorted(p["env"].items()))
                + "argv:\n  "
                + " \\\n    ".join(_argv_lines(p["argv"]))
            ),
        )
        return 0
    progress = None if args.json or not sys.stderr.isatty() else _progress
    status = controller.start(args.profile, knobs, timeout_s=args.timeout, on_progress=progress)
    if progress:
        sys.stderr.write("\n")
    emit_record(args.json, status, _human_status)
    return 0


def _argv_lines(argv: list[str]) -> list[str]:
    """One line per flag with its value, shell-quoted, so the command can be pasted as is."""
    import shlex

    lines: list[str] = []
    for arg in argv:
        if arg.startswith("--") or not lines:
            lines.append(shlex.quote(arg))
        else:
            lines[-1] += " " + shlex.quote(arg)
    return lines


def cmd_status(args: argparse.Namespace) -> int:
    status = EngineController().status()
    emit_record(args.json, status, _human_status)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    status = EngineController().stop(grace_s=args.grace)
    emit_record(args.json, status, _human_status)
    return 0


def cmd_restart(args: argparse.Namespace) -> int:
    status = EngineController().restart(parse_key_values(args.knob))
    emit_record(args.json, status, _human_status)
    return 0


def cmd_knob(args: argparse.Namespace) -> int:
    change = EngineController().set_knob(args.name, args.value, profile=args.profile)
    how = {
        "live": "applied live, no restart",
        "restart": "applied by restarting the engine",
        "next-start": "saved: no engine is running, applied at the next start",
    }[change.applied]
    emit(args.json, change.to_json(), lambda p: f"{p['name']}: {p['old']} -> {p['new']} ({how})")
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    controller = EngineController()
    for line in controller.tail_log(args.lines):
        print(line)
    if not args.follow:
        return 0
    path = controller.log_path()
    handle = open(path, "rb") if path.exists() else None
    if handle:
        handle.seek(0, 2)
    while True:  # until Ctrl-C; reopen when the log is rotated by a restart
        if handle is None or (path.exists() and path.stat().st_ino != _inode(handle)):
            handle = open(path, "rb") if path.exists() else None
        chunk = handle.read() if handle else b""
        if chunk:
            sys.stdout.write(chunk.decode("utf-8", "replace"))
            sys.stdout.flush()
        else:
            time.sleep(0.3)


def _inode(handle: IO[bytes]) -> int:
    import os

    return os.fstat(handle.fileno()).st_ino


def cmd_fit(args: argparse.Namespace) -> int:
    prof = load_profile(args.profile)
    if prof.kind != "exl3":
        raise ProfileError(f"{prof.source}: kind: {prof.kind}; the split's fit is exllamav3's (an exl3 profile)")
    controller = EngineController()
    result = split_fit.fit_profile(
        prof,
        controller.knob_values(prof, parse_key_values(args.knob)),
        controller.files.root,
        checkpoint=args.checkpoint,
        context=args.context,
        budget_mib=args.budget_mib,
        version=args.exl3_version,
        floor_mib=args.floor_mib,
    )
    emit_record(args.json, result, _human_fit)
    return 0 if result.split is not None else 1


def _human_fit(fit: split_fit.Fit) -> str:
    key = fit.key
    lines = [
        f"{fit.profile}: {fit.checkpoint} (tensor table {fit.fingerprint}): {fit.layers} MoE layers"
        + (f" + {fit.draft_layers} of the draft" if fit.draft_layers else "")
        + f", {fit.experts_per_layer} routed experts each, {fit.expert_mib:.2f} MiB an expert on the GPU",
        f"context {key.context if key else '?'}, draft {key.draft if key else '?'}, exllamav3 "
        f"{key.exllamav3 if key else 'unknown'}",
        f"budget {fit.budget_mib:,.0f} MiB ({fit.budget_from})",
    ]
    if fit.split is not None:
        lines.append(f"fit: cpu_split {fit.split}, predicted {fit.predicted_mib:,.1f} MiB")
    elif fit.needs:
        lines.append(f"no fit: {fit.needs}")
    else:
        lines.append("no fit: no split fits the budget")
    if fit.floor is not None:
        lines.append(f"  floor: {fit.floor.describe()}")
    width = max(len(name) for name in fit.parts)
    lines.append(f"at cpu_split {fit.parts_split}:")
    lines += [f"  {name:<{width}}  {mib:>10,.1f} MiB" for name, mib in fit.parts.items()]
    if fit.rows:
        extra = " and the fit" if fit.split is not None and fit.split not in fit.profile_values else ""
        lines.append(f"the profile's {fit.knob or 'split'} values{extra}:")
        for row in fit.rows:
            said = "" if row.applied == row.split else f" (exllamav3 applies {row.applied})"
            if row.predicted_mib is None:
                lines.append(f"  {row.split:>3}{said}: routed experts {row.experts_gpu_mib:,.0f} MiB on the GPU")
            else:
                verdict = "fits" if row.fits else "does not fit"
                lines.append(f"  {row.split:>3}{said}: predicted {row.predicted_mib:,.0f} MiB, {verdict}")
        if fit.profile_values and fit.predicted_mib is not None and fit.split not in fit.profile_values:
            pick = fit.profile_split
            lines.append(
                f"  (the knob takes {', '.join(map(str, fit.profile_values))}: "
                + (f"the smallest that fits is {pick})" if pick is not None else "none fits)")
            )
    lines += [f"note: {note}" for note in fit.notes]
    return "\n".join(lines)


def cmd_floors(args: argparse.Namespace) -> int:
    root = EngineController().files.root
    floors, path = split_fit.read_floors(root), split_fit.floors_path(root)

    def human(payload: dict[str, Any]) -> str:
        if not floors:
            return f"no floors measured yet ({path}): each exl3 start records one when it is ready"
        out = []
        for floor in floors:
            out.append(f"{floor.key.describe()}, split {floor.split}:")
            out.append(f"  {floor.describe()}")
        return "\n".join(out)

    emit(args.json, {"file": str(path), "floors": [f.to_json() for f in floors]}, human)
    return 0


def cmd_profiles(args: argparse.Namespace) -> int:
    items: list[dict[str, Any]] = []
    for entry in list_profiles():
        if isinstance(entry, ProfileError):
            items.append({"error": str(entry)})
            continue
        items.append(
            {
                "name": entry.name,
                "kind": entry.kind,
                "description": entry.description,
                "source": str(entry.source),
                "knobs": {
                    k.name: {
                        "values": list(k.values),
                        "default": k.default,
                        "apply": k.apply,
                        "target": k.target,
                        "needs_restart": k.needs_restart,
                        "description": k.description,
                    }
                    for k in entry.knobs.values()
                },
            }
        )

    def human(payload: dict[str, Any]) -> str:
        out = []
        for item in payload["profiles"]:
            if "error" in item:
                out.append(f"! {item['error']}")
                continue
            out.append(f"{item['name']} [{_kind_label(item['kind'])}]: {item['description']}")
            for name, knob in item["knobs"].items():
                how = "live" if not knob["needs_restart"] else f"restart ({knob['apply']} {knob['target']})"
                out.append(
                    f"    {name:<24} {'/'.join(str(v) for v in knob['values']):<14} default {knob['default']}  {how}"
                )
        return "\n".join(out)

    emit(args.json, {"profiles": items}, human)
    return 1 if any("error" in item for item in items) else 0
