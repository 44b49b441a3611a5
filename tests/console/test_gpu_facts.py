"""The dashboard's GPU panel shows the rig's fixed facts per card (issue 49): the PCIe link against the card's
maximum and the power limit against the board's default, marked when one is below the card's own."""

from __future__ import annotations

import dataclasses

from frank.console.screens.dashboard import gpu_views
from frank.console.widgets.gpu_panel import rig_facts_text
from tests.recorded_nvml import readings


def test_the_facts_text_names_a_link_trained_down_and_a_lowered_limit() -> None:
    assert rig_facts_text(5, 16, 5, 16, 700.0, 700.0) == ("PCIe gen5 x16 of gen5 x16 · limit 700 of 700 W", False)
    assert rig_facts_text(4, 16, 5, 16, 700.0, 700.0)[1] is True
    assert rig_facts_text(5, 8, 5, 16, 700.0, 700.0)[1] is True
    assert rig_facts_text(5, 16, 5, 16, 600.0, 700.0) == ("PCIe gen5 x16 of gen5 x16 · limit 600 of 700 W", True)
    assert rig_facts_text(5, 16, None, None, None, None) == ("PCIe gen5 x16", False)  # no maximum read: no claim
    assert rig_facts_text(None, None, None, None, None, None) == ("", False)


def test_the_dashboard_maps_each_cards_facts_from_the_sampler() -> None:
    reading = readings()[-1]
    lowered = dataclasses.replace(reading.gpus[1], pcie_gen=3, power_limit_w=500.0)
    snap = type("Snap", (), {"gpu": dataclasses.replace(reading, gpus=(reading.gpus[0], lowered))})()
    views, error = gpu_views(snap, [])  # type: ignore[arg-type]
    assert error is None and [v.facts_off for v in views] == [False, True]
    assert views[0].facts == "PCIe gen5 x16 of gen5 x16 · limit 700 of 700 W"
    assert views[1].facts == "PCIe gen3 x16 of gen5 x16 · limit 500 of 700 W"
