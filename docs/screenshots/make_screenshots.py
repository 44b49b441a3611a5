"""Save the README's console screenshots from a REAL session: the running embedded engine (FRANK_HOME's
state dir), the real telemetry sampler, and replays launched from the Replays screen: a W01-mini draw in
engine mode (replays.svg), then the shipped review-t0 workload in full mode at temperature 0, replayed
until the engine metrics panel has verify-step and acceptance-length history (dashboard*.svg and the rest).

    .venv/bin/frank engine start && .venv/bin/python docs/screenshots/make_screenshots.py
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
REVIEW = REPO / "frank" / "experiments" / "designs" / "workloads" / "review-t0"


async def launch(app, pilot, key: str, mode: str, draws: str, limit: str) -> None:
    """Pick workload `key` on the Replays screen with these options and press enter (as an operator)."""
    await pilot.press("2")
    await pilot.pause(1.0)
    screen = app.screen
    table = screen.query_one("#workloads")
    for _ in range(50):  # the list is filled by a worker
        if key in table.rows:
            break
        await pilot.pause(0.1)
    table.move_cursor(row=table.get_row_index(key))
    screen.query_one("#rep-draws").value = draws
    screen.query_one("#rep-limit").value = limit
    screen.query_one("#rep-mode").value = mode
    table.focus()
    await pilot.press("enter")
    for _ in range(100):
        await pilot.pause(0.1)
        if app.job is not None and app.job.running:
            break


async def wait_done(app, pilot, seconds: float = 120) -> None:
    for _ in range(int(seconds * 10)):
        if app.job is None or not app.job.running:
            return
        await pilot.pause(0.1)


def verify_points(app) -> int:
    """How many of the last 60 samples carry a verify-step time (what the sparkline draws)."""
    history = app.services.sampler.history(60.0)
    return sum(
        1
        for s in history
        if s.engine.rates is not None and s.engine.rates.valid and s.engine.rates.window_verify_step_s is not None
    )


async def main() -> int:
    from frank import paths
    from frank.console.app import FrankApp, default_services

    review = paths.workloads_dir() / "review-t0"
    if not review.exists():
        shutil.copytree(REVIEW, review)
    app = FrankApp(default_services(None, 1.0), remember_theme=False)
    async with app.run_test(size=(120, 36)) as pilot:
        for _ in range(100):
            await pilot.pause(0.1)
            if app.engine_status is not None:
                break
        if app.engine_state != "ready":
            print(f"the engine is {app.engine_state}: start it first (frank engine start)")
            return 1
        await launch(app, pilot, "w01-mini", "engine", "draw-3", "30")
        for _ in range(600):
            await pilot.pause(0.1)
            if app.job is not None and len(app.job.records) >= 12:
                break
        app.save_screenshot(str(HERE / "replays.svg"))
        await wait_done(app, pilot)
        # Full mode at temperature 0: ngram drafts are verified, so the metrics panel has data to draw.
        for _ in range(10):  # until the sparklines have history, shot mid-replay
            await launch(app, pilot, review.name, "full", "all", "")
            await pilot.press("1")
            await pilot.pause(2.0)
            if verify_points(app) >= 12 and app.job.running:
                break
            await wait_done(app, pilot)
        app.save_screenshot(str(HERE / "dashboard.svg"))
        await pilot.resize_terminal(80, 24)
        await pilot.pause(1.5)
        app.save_screenshot(str(HERE / "dashboard-80x24.svg"))
        await pilot.resize_terminal(120, 36)
        await pilot.press("4")
        await pilot.pause(1.5)
        app.save_screenshot(str(HERE / "logs.svg"))
        await pilot.press("3")
        await pilot.pause(1.5)
        app.save_screenshot(str(HERE / "experiments.svg"))
        if app.job is not None and app.job.running:
            from frank import jobs

            jobs.cancel(app.job.run_id, wait_s=30)  # the replay job would outlive the console
    print("saved:", ", ".join(sorted(p.name for p in HERE.glob("*.svg"))))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
