"""The HTML report of the seed's published numbers, rendered by headless Chromium: the page is one file
(no script, nothing loaded), its plots are drawn, and the decision and p-value are on it. The real-run
report is rendered in tests/integration/test_campaign_watch.py."""

from __future__ import annotations

from pathlib import Path

from frank.paths import REPO_ROOT
from tests import chromium

DESIGNS = REPO_ROOT / "frank" / "experiments" / "designs"


def test_the_seed_schedule_report_renders_with_its_plots(frank_cli, tmp_path: Path) -> None:
    page = tmp_path / "schedule.html"
    res = frank_cli(
        "experiment",
        "analyze",
        str(DESIGNS / "seed-schedule-2.toml"),
        str(DESIGNS / "seed-schedule-2.csv"),
        "--html",
        str(page),
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    source = page.read_text()
    for loads in ("<script", "<link", " src=", "url(http", "@import"):  # self-contained: nothing to fetch
        assert loads not in source
    dom = chromium.dump_dom(page.as_uri(), tmp_path)
    assert "CONFIRMED" in dom.upper() and "p = 1/32" in dom and "ce8451947184f5e59b0150cf3e2e" in dom
    assert 'id="plot-values"' in dom and 'id="plot-effects"' in dom and dom.count("<svg") == 2
    assert "-2.92" in dom and "mean -2.07%" in dom  # block 3's effect (the table) and the mean (a plot label)
    png = chromium.screenshot(page.as_uri(), tmp_path / "schedule.png")
    assert chromium.colours(png) > 20
