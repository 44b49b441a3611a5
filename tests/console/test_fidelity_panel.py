"""Fidelity on the Experiments screen: `f` with no engine asks for one (nothing is launched), and the panel
renders the newest run's per-set KL with the floor beside it, and the fidelity job's state."""

from __future__ import annotations

import pytest

from frank import jobs
from frank.console.screens.experiments import ExperimentsScreen
from frank.console.state import FidelityRun, FidelitySet, FidelityView
from frank.console.widgets.fidelity_panel import FidelityPanel, fidelity_markup, job_line
from tests.console.conftest import wait_until

pytestmark = pytest.mark.usefixtures("job_kinds")


async def test_f_without_an_engine_launches_nothing(make_app):
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        assert isinstance(app.screen, ExperimentsScreen)
        panel = app.screen.query_one(FidelityPanel)
        assert await wait_until(pilot, lambda: "no fidelity run yet" in panel.markup_text)
        await pilot.press("f")
        assert await wait_until(
            pilot, lambda: any("needs a running engine" in str(n.message) for n in app._notifications)
        )
    assert jobs.list_jobs(of=("fidelity",)) == []


def test_markup_puts_the_floor_beside_each_sets_kl():
    run = FidelityRun(
        "20261130-1200-run-ab12",
        "run",
        (("dtype", "bfloat16"),),
        (FidelitySet("code", 6.6e-9, 4.5e-16, 1.47e7), FidelitySet("prose", 7.0e-16, 4.5e-16, 1.56)),
    )
    text = fidelity_markup(run, "[$frank-warn]fidelity job x running[/]")
    lines = text.splitlines()
    assert lines[0].startswith("[$frank-warn]fidelity job")
    assert "dtype=bfloat16" in lines[1]
    code = next(line for line in lines if line.startswith("code"))
    assert "[$frank-bad] 6.60e-09[/]  4.50e-16  1.47e+07" in code
    prose = next(line for line in lines if line.startswith("prose"))
    assert "[$frank-ok] 7.00e-16[/]  4.50e-16      1.56" in prose


def test_job_line_names_a_running_or_failed_job():
    running = jobs.JobStatus("r1", "fidelity", "running", 0, 3, 42, "/x", detail="code: reference")
    assert "r1 running: code: reference" in job_line(FidelityView(None, running))
    failed = jobs.JobStatus("r2", "fidelity", "failed", 0, 3, None, "/x", detail="FrankError: no engine")
    assert "failed: FrankError: no engine" in job_line(FidelityView(None, failed))
    assert job_line(FidelityView()) == ""
