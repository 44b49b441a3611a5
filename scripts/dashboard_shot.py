"""Save the console's dashboard as SVG from a real session, headless (Textual's run_test; no terminal needed).

With no --url the console watches frank's own engine (the state dir's, as `frank` does); with --url it
watches that server through the same sampler as `frank telemetry --url`. It waits until the telemetry has
--samples snapshots with a GPU reading (and, with --busy-file, until that file exists: a replay running
beside it), so the sparklines have history, then saves the screenshot.

    python scripts/dashboard_shot.py --out dashboard.svg [--url URL --pid PID --api-key KEY --model NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="SVG file to write")
    p.add_argument("--url", help="watch this server instead of frank's engine")
    p.add_argument("--pid", type=int, help="with --url: the server's pid")
    p.add_argument("--api-key", help="with --url: its bearer key")
    p.add_argument("--model", help="with --url: its served model name")
    p.add_argument("--samples", type=int, default=20, help="telemetry samples to wait for (default 20)")
    p.add_argument("--busy-file", type=Path, help="also wait until this file exists (a load running beside)")
    p.add_argument("--hold", type=float, default=0.0, help="then wait this many seconds more (default 0)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait at most (default 120)")
    p.add_argument("--size", default="120x36", help="terminal COLSxROWS (default 120x36)")
    return p.parse_args(argv)


def services(args: argparse.Namespace):
    from frank.console.services import Services, default_services
    from frank.engine.controller import EngineController
    from frank.telemetry.sampler import Sampler, static_target

    if not args.url:
        return default_services(None, 1.0)
    target = static_target(args.url, args.pid, args.api_key, args.model)
    return Services(controller=EngineController(), sampler=Sampler(target, period_s=1.0))


def gpu_samples(app) -> int:
    return sum(1 for s in app.services.sampler.history(None) if s.gpu.gpus)


async def shoot(args: argparse.Namespace) -> int:
    from frank.console.app import FrankApp

    cols, rows = (int(v) for v in args.size.split("x"))
    app = FrankApp(services(args), remember_theme=False, offer_start=False)
    deadline = time.monotonic() + args.timeout
    async with app.run_test(size=(cols, rows)) as pilot:
        busy_since = None if args.busy_file else time.monotonic()
        while time.monotonic() < deadline:
            await pilot.pause(0.5)
            if busy_since is None and args.busy_file.exists():
                busy_since = time.monotonic()
            held = busy_since is not None and time.monotonic() - busy_since >= args.hold
            if held and gpu_samples(app) >= args.samples:
                break
        await pilot.pause(1.5)  # one more refresh tick after the last sample
        args.out.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(str(args.out))
        got = gpu_samples(app)
    print(f"saved {args.out}: {got} samples with a GPU reading, engine {app.engine_state}")
    return 0 if got else 1


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(shoot(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
