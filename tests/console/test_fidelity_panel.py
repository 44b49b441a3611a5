"""Fidelity on the Experiments screen: `f` runs `frank fidelity run` (here with no engine: its error is
shown), and the panel renders a run's per-set KL with the floor beside it."""

from __future__ import annotations

from frank.console.screens.experiments import ExperimentsScreen
from frank.console.widgets.fidelity_panel import FidelityPanel, fidelity_markup
from tests.console.conftest import wait_until


async def test_f_runs_fidelity_and_shows_the_clis_error(make_app):
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        assert isinstance(app.screen, ExperimentsScreen)
        panel = app.screen.query_one(FidelityPanel)
        assert await wait_until(pilot, lambda: "no fidelity run yet" in panel.markup_text)
        await pilot.press("f")
        assert await wait_until(pilot, lambda: "needs a running engine" in panel.markup_text, timeout_s=30)
        assert "running fidelity" not in panel.markup_text


def test_markup_puts_the_floor_beside_each_sets_kl():
    run = {
        "id": "20261130-1200-run-ab12",
        "kind": "run",
        "knobs": {"dtype": "bfloat16"},
        "sets": [
            {"name": "code", "kl": 6.6e-9, "floor": {"value": 4.5e-16}, "kl_over_floor": 1.47e7},
            {"name": "prose", "kl": 7.0e-16, "floor": {"value": 4.5e-16}, "kl_over_floor": 1.56},
        ],
    }
    text = fidelity_markup(run, running=True)
    lines = text.splitlines()
    assert lines[0].startswith("[$frank-warn]running fidelity")
    assert "dtype=bfloat16" in lines[1]
    code = next(line for line in lines if line.startswith("code"))
    assert "[$frank-bad] 6.60e-09[/]  4.50e-16  1.47e+07" in code
    prose = next(line for line in lines if line.startswith("prose"))
    assert "[$frank-ok] 7.00e-16[/]  4.50e-16      1.56" in prose
