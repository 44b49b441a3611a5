"""The console during a registered experiment run: its dashboard and experiments screen saved as SVG, and
the keypress-to-paint figure while the run goes. Headless (Textual's run_test), over frank's own engine
(the state dir's, as `frank` does) and the run the experiments screen follows.

It waits until the telemetry has --samples snapshots with a GPU reading (and the run has --cells cells
done, so the board has values), saves `dashboard.svg`, switches to the experiments screen with the run
selected and saves `experiments.svg`, then presses 1 and 3 in turn --keys times and times each key from
the app's queue to the new screen written out (benchmarks/bench_console.py `key_to_paint`). Prints and
writes `console.json` with the figures, the engine's state and the run's cells at each shot.

    python scripts/console_shots.py --out-dir DIR --run RUN_ID [--samples 10] [--cells 2] [--keys 20]

With --replay WORKLOAD instead of --run, the console launches that replay itself from its replays menu (the
draw and request limit typed into the menu's fields, then L), saves `dashboard.svg` and `replays.svg` once the
replay has --records requests done, times keys 1 and 2, and waits for the replay to finish (its run folder's
summary.json goes into `console.json`):

    python scripts/console_shots.py --out-dir DIR --replay w01-mini --draw draw-1 --limit 5 [--records 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out-dir", type=Path, required=True)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--run", help="the registered run the experiments screen shows")
    what.add_argument("--replay", metavar="WORKLOAD", help="launch this replay from the console's replays menu")
    p.add_argument("--draw", default="draw-1", help="--replay: the draw typed into the menu")
    p.add_argument("--limit", type=int, default=5, help="--replay: requests of the draw typed into the menu")
    p.add_argument("--records", type=int, default=2, help="--replay: requests done before the shots")
    p.add_argument("--samples", type=int, default=10, help="telemetry samples with a GPU reading to wait for")
    p.add_argument("--cells", type=int, default=1, help="cells of the run done before the shots")
    p.add_argument("--keys", type=int, default=20, help="keypresses timed (0: none)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait at most for the samples and cells")
    p.add_argument("--size", default="120x36", help="terminal COLSxROWS (default 120x36)")
    return p.parse_args(argv)


def cells_done(run_id: str) -> int:
    from frank.experiments import registry
    from frank.experiments.journal import fold, read_events

    progress = fold(read_events(registry.load_run(run_id).journal_path))
    return sum(1 for slot in progress.attempts if progress.done(slot) is not None)


async def shoot(args: argparse.Namespace) -> dict:
    from benchmarks.bench_console import key_to_paint, latency_figures
    from frank.console.app import FrankApp
    from frank.console.screens.dashboard import DashboardScreen
    from frank.console.screens.experiments import ExperimentsScreen
    from frank.console.services import default_services

    cols, rows = (int(v) for v in args.size.split("x"))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    app = FrankApp(default_services(None, 1.0), remember_theme=False, offer_start=False)
    out: dict = {"run": args.run}

    def gpu_samples() -> int:
        return sum(1 for s in app.services.sampler.history(None) if s.gpu.gpus)

    async with app.run_test(size=(cols, rows)) as pilot:
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            await pilot.pause(0.5)
            if gpu_samples() >= args.samples and cells_done(args.run) >= args.cells:
                break
        await pilot.pause(1.5)  # one more refresh tick after the last sample
        app.save_screenshot(str(args.out_dir / "dashboard.svg"))
        out["dashboard"] = {
            "gpu_samples": gpu_samples(),
            "engine": app.engine_state,
            "cells_done": cells_done(args.run),
        }
        await pilot.press("3")
        await pilot.pause(1.0)
        app.screen.select_run(args.run)
        await pilot.pause(3.0)  # the board is read from the journal at the console's 1 Hz
        app.save_screenshot(str(args.out_dir / "experiments.svg"))
        out["experiments"] = {"engine": app.engine_state, "cells_done": cells_done(args.run)}
        if args.keys:
            sequence = [("1", DashboardScreen), ("3", ExperimentsScreen)]
            lat, per_screen = await key_to_paint(app, sequence, args.keys)
            out["key_to_paint"] = latency_figures(lat, per_screen) | {"cells_done_after": cells_done(args.run)}
    (args.out_dir / "console.json").write_text(json.dumps(out, indent=2) + "\n")
    return out


async def shoot_replay(args: argparse.Namespace) -> dict:
    """The replay launched from the menu, as an operator does it, with the dashboard and replays shots mid-run."""
    from textual.widgets import DataTable, Input

    from benchmarks.bench_console import key_to_paint, latency_figures
    from frank.console.app import FrankApp
    from frank.console.screens.dashboard import DashboardScreen
    from frank.console.screens.replays import ReplaysScreen
    from frank.console.services import default_services

    cols, rows = (int(v) for v in args.size.split("x"))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    app = FrankApp(default_services(None, 1.0), remember_theme=False, offer_start=False)
    out: dict = {"replay": args.replay}

    def gpu_samples() -> int:
        return sum(1 for s in app.services.sampler.history(None) if s.gpu.gpus)

    def followed():  # the replay the menu launched, as the console follows it
        return app.state.jobs.followed

    async with app.run_test(size=(cols, rows)) as pilot:
        await pilot.press("2")
        await pilot.pause(2.0)  # the workloads list is read by the jobs source
        screen = app.screen
        assert isinstance(screen, ReplaysScreen), screen
        screen.query_one("#rep-draws", Input).value = args.draw
        screen.query_one("#rep-limit", Input).value = str(args.limit)
        table = screen.query_one("#workloads", DataTable)
        table.move_cursor(row=table.get_row_index(args.replay))
        table.focus()
        await pilot.press("L")
        t0 = time.monotonic()
        deadline = t0 + args.timeout
        while time.monotonic() < deadline:
            await pilot.pause(0.5)
            job = followed()
            if job is not None and job.received >= args.records and gpu_samples() >= args.samples:
                break
        job = followed()
        out["launched_run"] = job.run_id if job else None
        app.save_screenshot(str(args.out_dir / "replays.svg"))
        await pilot.press("1")
        await pilot.pause(1.5)
        app.save_screenshot(str(args.out_dir / "dashboard.svg"))
        out["dashboard"] = {
            "gpu_samples": gpu_samples(),
            "engine": app.engine_state,
            "records_done": job.received if job else 0,
            "s_after_launch": round(time.monotonic() - t0, 1),
        }
        if args.keys:
            sequence = [("1", DashboardScreen), ("2", ReplaysScreen)]
            lat, per_screen = await key_to_paint(app, sequence, args.keys)
            out["key_to_paint"] = latency_figures(lat, per_screen)
        while time.monotonic() < deadline and (followed() is None or followed().running):
            await pilot.pause(1.0)
    out["summary"] = replay_summary(out["launched_run"])
    (args.out_dir / "console.json").write_text(json.dumps(out, indent=2) + "\n")
    return out


def replay_summary(run_id: str | None) -> dict | None:
    """The launched replay's summary.json (its draws' totals: verify step, CPU-expert wait), None if absent."""
    if run_id is None:
        return None
    from frank.workloads import catalog

    return next((run for run in catalog.list_runs() if run["run_id"] == run_id), None)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = asyncio.run(shoot_replay(args) if args.replay else shoot(args))
    print(json.dumps(out))
    return 0 if out["dashboard"]["gpu_samples"] else 1


if __name__ == "__main__":
    sys.exit(main())
