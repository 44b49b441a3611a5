"""`frank`: with no sub-command it opens the console; every console action has a sub-command twin.

Each sub-command lives in its own module with a `register(subparsers)` function that adds its parser and
sets `func`. Headless commands never import textual, so scripts and cron stay fast.
"""

from __future__ import annotations

import argparse
import os
import sys

from frank.console.cli import (
    bench_cmd,
    campaign_cmd,
    engine_cmd,
    episodes_cmd,
    experiment_cmd,
    fidelity_cmd,
    fleet_cmd,
    jobs_cmd,
    model_cmd,
    record_cmd,
    replay_cmd,
    serve_cmd,
    telemetry_cmd,
    workload_cmd,
)
from frank.errors import FrankError

COMMANDS = (  # in the order `frank --help` lists them
    engine_cmd,
    model_cmd,
    telemetry_cmd,
    workload_cmd,
    replay_cmd,
    jobs_cmd,
    record_cmd,
    experiment_cmd,
    bench_cmd,
    campaign_cmd,
    serve_cmd,
    fidelity_cmd,
    episodes_cmd,
    fleet_cmd,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="frank", description="Operator console for a vLLM inference workstation.")
    parser.add_argument(
        "--profile", help="engine profile for the console (default: the running engine's, else embedded-cpu)"
    )
    parser.add_argument("--read-only", action="store_true", help="watch only: no start, stop, knob or replay actions")
    parser.add_argument("--theme", help="console theme (remembered)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command is None:
            from frank.console.app import run_console  # textual is imported only here

            return run_console(args)
        return int(args.func(args) or 0)
    except FrankError as exc:
        print(f"frank: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("frank: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`frank ... --json | head`): no traceback, and none at exit for the unflushed
        # rest (Python's own advice for SIGPIPE)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command a pipe ended


if __name__ == "__main__":
    sys.exit(main())
