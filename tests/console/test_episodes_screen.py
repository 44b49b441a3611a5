"""The episodes screen over the shared real engine: launch w01-mini from the menu (a detached job), watch the
live episode (task, turn, elapsed, outcome) and the finished one graded, then cancel the job; the run is
listed with its totals."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable

from frank import jobs
from frank.console.app import FrankApp, Services
from frank.console.screens.episodes import EpisodesScreen
from frank.console.screens.launch_episodes import EpisodesLaunch
from frank.episodes.runner import list_runs, read_jsonl, run_path
from frank.telemetry.sampler import Sampler, controller_target
from tests.console.conftest import wait_until

pytestmark = [pytest.mark.engine, pytest.mark.usefixtures("job_kinds")]


async def wait(pilot, predicate, timeout_s: float) -> bool:
    return await wait_until(pilot, predicate, timeout_s, step_s=0.1)


def _cell(table: DataTable, row: str, column: str) -> str:
    return str(table.get_cell(row, column)) if row in table.rows else ""


async def test_episodes_launched_from_the_menu_are_followed_live(engine):
    sampler = Sampler(controller_target(engine), period_s=1.0, gpu=False)
    app = FrankApp(Services(controller=engine, sampler=sampler), remember_theme=False)
    async with app.run_test(size=(150, 40)) as pilot:
        assert await wait(pilot, lambda: app.engine_state == "ready", 15)
        await pilot.press("6")
        screen = app.screen
        assert isinstance(screen, EpisodesScreen)
        suites = screen.query_one("#ep-suites", DataTable)
        assert await wait(pilot, lambda: "w01-mini" in suites.rows, 5)
        suites.move_cursor(row=list(suites.rows).index("w01-mini"))
        await pilot.press("L")  # asks for the suite (the highlighted one) and the draws (1)
        assert await wait(pilot, lambda: isinstance(app.screen, EpisodesLaunch), 5)
        await pilot.press("enter")
        assert await wait(pilot, lambda: screen.followed is not None, 15)
        run_id = screen.followed
        episodes = screen.query_one("#ep-episodes", DataTable)
        first = "d1-fix-failing-test"
        # live: the first episode is shown graded, with its turns and elapsed time, while the draw still runs
        # (an episode of the tiny model takes under a second: its transient "running" row may fall between
        # two polls, so the check is "graded before the run ended", read from one poll)
        assert await wait(
            pilot,
            lambda: (
                "fail" in _cell(episodes, first, "outcome")
                and screen.state is not None
                and screen.state.status == "running"
            ),
            180,
        )
        assert _cell(episodes, first, "turn") not in ("", "0")
        assert _cell(episodes, first, "elapsed").endswith(" s")
        try:
            jobs.cancel(run_id, wait_s=30)
        except jobs.JobError:  # the draw ended on its own meanwhile
            assert jobs.status(run_id).state == "finished"
        assert await wait(pilot, lambda: screen.state is not None and screen.state.status != "running", 30)
        runs = screen.query_one("#ep-runs", DataTable)
        assert await wait(pilot, lambda: run_id in runs.rows, 15)
    results = read_jsonl(run_path(run_id) / "results.jsonl")
    assert results[0]["task"] == "fix-failing-test" and results[0]["outcome"] == "fail"
    [listed] = [r for r in list_runs() if r["run_id"] == run_id]
    assert listed["done"] == len(results) and listed["total_s"] == pytest.approx(
        sum(r["client_s"] or 0 for r in results), abs=0.01
    )
