"""Save the README's console screenshots from a REAL session: the running embedded engine (FRANK_HOME's
state dir), the real telemetry sampler, and a W01-mini replay launched from the Replays screen.

    .venv/bin/frank engine start && .venv/bin/python docs/screenshots/make_screenshots.py
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))


async def main() -> int:
    from console.app import FrankApp, default_services

    app = FrankApp(default_services(None, 1.0), remember_theme=False)
    async with app.run_test(size=(120, 36)) as pilot:
        for _ in range(100):
            await pilot.pause(0.1)
            if app.engine_status is not None:
                break
        if app.engine_state != "ready":
            print(f"the engine is {app.engine_state}: start it first (frank engine start)")
            return 1
        await pilot.press("2")
        await pilot.pause(1.0)
        screen = app.screen
        screen.query_one("#rep-draws").value = "draw-3"
        screen.query_one("#rep-limit").value = "30"
        screen.query_one("#workloads").focus()
        await pilot.press("enter")
        for _ in range(600):
            await pilot.pause(0.1)
            if app.replay is not None and len(app.replay.records) >= 12:
                break
        app.save_screenshot(str(HERE / "replays.svg"))
        await pilot.press("1")
        await pilot.pause(4.0)
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
        if app.replay is not None and app.replay.running:
            app.replay.cancel()
            for _ in range(300):
                await pilot.pause(0.1)
                if not app.replay.running:
                    break
    print("saved:", ", ".join(sorted(p.name for p in HERE.glob("*.svg"))))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
