"""`frank jobs list|status RUN|cancel RUN`: the detached jobs (replays, experiments, episodes) of this user.

Every job is a run folder; `status --follow` polls it once a second (frank.jobs.Follower) until it ends.
"""

from __future__ import annotations

import argparse
import sys
import time
from types import ModuleType
from typing import Any

from frank.console.cli.common import emit


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("jobs", help="detached jobs: list, status, cancel")
    jsub = p.add_subparsers(dest="jobs_command", metavar="ACTION", required=True)
    ls = jsub.add_parser("list", help="every run of every kind, newest first")
    ls.add_argument("--running", action="store_true", help="only the running ones")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)
    st = jsub.add_parser("status", help="one run: state, done/planned, pid")
    st.add_argument("run", help="run id (or run folder)")
    st.add_argument("--follow", action="store_true", help="print progress once a second until the run ends")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_status)
    cancel = jsub.add_parser("cancel", help="stop a running job cleanly (SIGTERM); resume it later")
    cancel.add_argument("run", help="run id (or run folder)")
    cancel.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the job to stop")
    cancel.add_argument("--json", action="store_true")
    cancel.set_defaults(func=cmd_cancel)


def _line(s: dict[str, Any]) -> str:
    planned = "?" if s["planned"] is None else s["planned"]
    pid = f"  pid {s['pid']}" if s["pid"] else ""
    return f"{s['run_id']:<52} {s['kind']:<10} {s['state']:<11} {s['done']:>4}/{planned:<4}{pid}  {s['detail']}"


def _jobs() -> ModuleType:
    """frank.jobs with every kind registered (imported here, not at `frank --help`: the kinds import scipy)."""
    from frank import jobs
    from frank.console import job_kinds

    job_kinds.install()
    return jobs


def cmd_list(args: argparse.Namespace) -> int:
    jobs = _jobs()

    found = [j.to_json() for j in jobs.list_jobs(running_only=args.running)]
    emit(args.json, {"jobs": found}, lambda p: "\n".join(_line(s) for s in p["jobs"]) or "no jobs")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    jobs = _jobs()

    if not args.follow:
        emit(args.json, jobs.status(args.run).to_json(), _line)
        return 0
    follower = jobs.Follower(args.run, backlog=0)
    while True:
        st, _ = follower.poll()
        if args.json:
            emit(True, st.to_json())
        else:
            print(_line(st.to_json()), flush=True)
        if st.state != "running":
            return 0 if st.state == "finished" else 3
        try:
            time.sleep(1.0)
        except KeyboardInterrupt:
            print("stopped following; the job goes on", file=sys.stderr)
            return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    jobs = _jobs()

    st = jobs.cancel(args.run, wait_s=args.wait).to_json()
    emit(
        args.json,
        st,
        lambda s: (
            _line(s) + ("" if s["state"] != "running" else "\n(still stopping: it finishes the work in flight first)")
        ),
    )
    return 0
