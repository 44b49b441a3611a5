"""The Campaign screen (key 5) over the real ledger: the seed's parts as a board with their evidence and
rules, a refused adoption shown with its reason after confirming, and read-only mode asking nothing."""

from __future__ import annotations

from textual.widgets import DataTable

from frank.campaign import actions
from frank.campaign.ledger import history_path, read_history
from frank.console.screens.campaign import CampaignScreen
from frank.console.screens.confirm import ConfirmDialog
from tests.console.conftest import wait_until
from tests.unit.test_campaign import served_part_and_two_fidelity_runs


async def test_the_board_shows_the_seeds_parts_and_a_refused_adoption(make_app):
    app = make_app()
    actions.init(example="seed")  # FRANK_HOME is the test's own (make_app)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("5")
        assert isinstance(app.screen, CampaignScreen)
        table = app.screen.query_one("#parts-board", DataTable)
        assert await wait_until(pilot, lambda: table.row_count == 6, timeout_s=20)
        rows = [[str(c) for c in table.get_row(key)] for key in ("body", "schedule-2", "region-cache")]
        assert rows[0][:2] == ["body", "ADOPTED"] and rows[1][:2] == ["schedule-2", "SERVED"]
        assert rows[2][1] == "PASSED" and "p = 1/70" in rows[2][2] and rows[2][4].startswith("adopt")
        assert rows[1][3] == "3 not checked" and "p = 1/32" in rows[1][2] and rows[1][2].endswith("+ policy call")
        table.move_cursor(row=2)
        await pilot.pause(0.1)
        detail = str(app.screen.query_one("#part-text").content)
        assert "region-cache" in detail and "1/70" in detail and "schedule comparison" in detail

        await pilot.press("A")  # adopt asks first
        assert await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("y")
        assert await wait_until(
            pilot,
            lambda: any("no confirmed registered run" in str(n.message) for n in app._notifications),
            timeout_s=20,
        )
    events = read_history(history_path(actions.default_path()))
    assert [e["event"] for e in events] == ["init"]  # the refusal recorded nothing


async def test_read_only_disables_the_actions(make_app):
    app = make_app(read_only=True)
    actions.init(example="seed")
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("5")
        table = app.screen.query_one("#parts-board", DataTable)
        assert await wait_until(pilot, lambda: table.row_count == 6, timeout_s=20)
        for key in ("A", "S", "V"):
            await pilot.press(key)
            await pilot.pause(0.1)
            assert isinstance(app.screen, CampaignScreen), f"{key} asked nothing in read-only mode"
        assert "read-only" in str(app.screen.query_one("#campaign-status").content)


async def test_a_read_only_console_shows_a_fired_rule_and_writes_nothing(make_app):
    app = make_app(read_only=True, poll=True)  # poll: the app-wide revert watch runs too
    path = served_part_and_two_fidelity_runs(actions.default_path())
    history = history_path(path)
    before = history.read_bytes()
    told: list[str] = []  # every notification (a toast expires after its timeout: a loaded run could miss it)
    notify = app.notify
    app.notify = lambda message, *a, **kw: told.append(str(message)) or notify(message, *a, **kw)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("5")
        status = app.screen.query_one("#campaign-status")
        assert await wait_until(pilot, lambda: "REVERT RULE FIRED" in str(status.content), timeout_s=30)
        assert await wait_until(pilot, lambda: any("rule kl" in m for m in told), timeout_s=30), (
            "the watch did not notify the fired rule"
        )
    assert history.read_bytes() == before, "a read-only console appended to the campaign history"
