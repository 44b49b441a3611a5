"""`frank`: with no sub-command it opens the console; every console action has a sub-command twin.

Each sub-command lives in its own module with a `register(subparsers)` function that adds its parser and
sets `func`. Headless commands never import textual, so scripts and cron stay fast.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from frank.errors import FrankError

COMMAND_MODULES = (
    "frank.console.cli.engine_cmd",
    "frank.console.cli.model_cmd",
    "frank.console.cli.telemetry_cmd",
    "frank.console.cli.workload_cmd",
    "frank.console.cli.replay_cmd",
    "frank.console.cli.jobs_cmd",
    "frank.console.cli.record_cmd",
    "frank.console.cli.experiment_cmd",
    "frank.console.cli.bench_cmd",
    "frank.console.cli.campaign_cmd",
    "frank.console.cli.serve_cmd",
    "frank.console.cli.fidelity_cmd",
    "frank.console.cli.episodes_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="frank", description="Operator console for a vLLM inference workstation.")
    parser.add_argument(
        "--profile", help="engine profile for the console (default: the running engine's, else embedded-cpu)"
    )
    parser.add_argument("--read-only", action="store_true", help="watch only: no start, stop, knob or replay actions")
    parser.add_argument("--theme", help="console theme (remembered)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name).register(sub)
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


if __name__ == "__main__":
    sys.exit(main())
