"""Integration tier: the console over the shared real embedded engine (tests/conftest.py `engine`).
Adopt it, flip the live region cache from the keyboard (and back), launch a short replay from the menu (a
detached job the console follows) and watch its rows arrive by key, then see the request values on the
dashboard."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable

from frank.console.app import FrankApp, Services
from frank.console.screens.replays import ReplaysScreen
from frank.console.widgets.engine_panel import EnginePanel
from frank.telemetry.sampler import Sampler, controller_target
from frank.workloads.catalog import resolve_workload
from frank.workloads.format import load_workload

pytestmark = pytest.mark.engine


async def wait(pilot, predicate, timeout_s: float) -> bool:
    for _ in range(int(timeout_s / 0.1)):
        if predicate():
            return True
        await pilot.pause(0.1)
    return predicate()


async def test_console_drives_the_real_engine(engine):
    sampler = Sampler(controller_target(engine), period_s=1.0, gpu=False)
    app = FrankApp(Services(controller=engine, sampler=sampler), remember_theme=False)
    before = engine.status().knobs.get("region_cache", "off")
    async with app.run_test(size=(140, 40)) as pilot:
        assert await wait(pilot, lambda: app.engine_state == "ready", 15)  # adopted, not started
        assert f"pid[/] {engine.status().pid}" in app.screen.query_one(EnginePanel).markup_text
        try:
            await pilot.press("c")
            flipped = "on" if before == "off" else "off"
            assert await wait(pilot, lambda: engine.status().knobs.get("region_cache") == flipped, 20)
        finally:
            await pilot.press("c")
            assert await wait(pilot, lambda: engine.status().knobs.get("region_cache") == before, 20)

        await pilot.press("2")
        await pilot.pause(0.5)
        screen = app.screen
        assert isinstance(screen, ReplaysScreen)
        screen.query_one("#rep-draws").value = "draw-1"
        screen.query_one("#rep-limit").value = "2"
        screen.query_one("#workloads").focus()
        await pilot.press("enter")  # w01-mini (made on first use)
        assert await wait(
            pilot,
            lambda: (
                app.job is not None
                and app.job.status is not None
                and app.job.status.state not in ("running", "starting")
                and len(app.job.records) == 2
            ),
            240,
        )
        job = app.job
        assert job.status.state == "finished", job.status
        assert job.status.pid is None and (job.status.done, job.status.planned) == (2, 2)
        planned = load_workload(resolve_workload("w01-mini"), ["draw-1"]).requests["draw-1"][:2]
        assert [r.id for r in job.records] == [r.id for r in planned]
        await pilot.pause(0.2)
        table = screen.query_one("#rep-requests", DataTable)
        assert table.row_count == 2
        assert all(r.status == "ok" and r.timed and r.front_end_s is not None for r in job.records)
        totals = str(screen.query_one("#rep-totals").content)
        assert "2/2 ok" in totals and "0 failed" in totals
        await pilot.press("1")
        await pilot.pause(0.3)
        rows = app.screen.query_one("#metrics").query_one(DataTable)
        assert rows.row_count == 2  # the replay's own records
