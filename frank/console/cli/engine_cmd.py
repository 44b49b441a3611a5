"""`frank engine start|status|stop|restart|logs|knob` and `frank profiles`: the controller's CLI twins."""

from __future__ import annotations

import argparse
import sys
import time
from typing import IO, Any

from frank.console.cli.common import emit, emit_record, parse_key_values
from frank.engine.controller import EngineController, EngineStatus
from frank.engine.profiles import DEFAULT_PROFILE, ProfileError, list_profiles, load_profile


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
        }
        emit(
            args.json,
            payload,
            lambda p: (
                "env:\n"
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
