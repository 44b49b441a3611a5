"""Snapshot tests (pytest-textual-snapshot; textual is pinned exactly in pyproject.toml) of the main
screens in two themes and at 80x24, from recorded telemetry and a fixed engine status.
Update after an intended change: pytest tests/console/test_snapshots.py --snapshot-update"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.console.conftest import READY

LOG_DATA = Path(__file__).parent / "data" / "engine.log"
# The logs screen shows the log's path: copy it to a fixed path so a clone anywhere renders the same.
FIXED_LOG = Path("/tmp/frank-snapshot/engine.log")
STATUS = dataclasses.replace(READY, log_path="/var/lib/frank/state/logs/engine.log")


async def settle(pilot) -> None:
    app = pilot.app
    for _ in range(40):  # the telemetry source posts the recorded snapshot; the screen renders it
        await pilot.pause(0.05)
        if app.state.telemetry.snapshot is not None:
            break
    await pilot.pause(0.3)


@pytest.mark.parametrize("theme", ["frank-dark", "frank-light"])
def test_dashboard_wide(snap_compare, make_app, theme):
    assert snap_compare(make_app(status=STATUS, theme=theme), terminal_size=(120, 36), run_before=settle)


@pytest.mark.parametrize("theme", ["frank-dark", "frank-high-contrast"])
def test_dashboard_80x24(snap_compare, make_app, theme):
    assert snap_compare(make_app(status=STATUS, theme=theme), terminal_size=(80, 24), run_before=settle)


def test_dashboard_80x24_cpu_tab_monochrome(snap_compare, make_app):
    async def cpu_tab(pilot):
        await settle(pilot)
        await pilot.press("p")
        await pilot.pause(0.2)

    assert snap_compare(make_app(status=STATUS, theme="frank-monochrome"), terminal_size=(80, 24), run_before=cpu_tab)


def test_dashboard_stopped_engine_no_gpu(snap_compare, make_app):
    from tests.console.recorded import RecordedSampler

    status = dataclasses.replace(STATUS, state="stopped", pid=None, url=None, ready_s=None, uptime_s=None, knobs={})
    app = make_app(status=status, sampler=RecordedSampler(cores=2, gpus=0, engine=False), log_tail=[])
    assert snap_compare(app, terminal_size=(120, 36), run_before=settle)


@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
def test_replays(snap_compare, make_app, size):
    async def go(pilot):
        await settle(pilot)
        await pilot.press("2")
        await pilot.pause(0.5)

    assert snap_compare(make_app(status=STATUS), terminal_size=size, run_before=go)


@pytest.mark.parametrize("theme", ["frank-dark", "frank-light"])
def test_experiments(snap_compare, make_app, theme, monkeypatch):
    from frank.console.sources import experiments
    from frank.experiments.registry import BUILTIN_DESIGNS

    seeds = sorted(BUILTIN_DESIGNS.glob("seed-*.toml"))  # the shipped seed designs only
    monkeypatch.setattr(experiments, "design_files", lambda: seeds)

    async def go(pilot):
        await settle(pilot)
        await pilot.press("3")
        await pilot.pause(0.5)

    assert snap_compare(make_app(status=STATUS, theme=theme), terminal_size=(120, 36), run_before=go)


def test_logs_80x24(snap_compare, make_app):
    async def go(pilot):
        await settle(pilot)
        await pilot.press("4")
        await pilot.pause(0.5)
        await pilot.press("g")
        await pilot.pause(0.2)

    FIXED_LOG.parent.mkdir(exist_ok=True)
    FIXED_LOG.write_bytes(LOG_DATA.read_bytes())
    app = make_app(status=dataclasses.replace(STATUS, log_path=str(FIXED_LOG)))
    assert snap_compare(app, terminal_size=(80, 24), run_before=go)


def test_help_and_confirm(snap_compare, make_app):
    async def go(pilot):
        await settle(pilot)
        await pilot.press("x")
        await pilot.pause(0.3)

    assert snap_compare(make_app(status=STATUS), terminal_size=(100, 30), run_before=go)


def test_dashboard_two_h200s_and_refused_parts(snap_compare, make_app):
    """Two GPUs as frank's GPU sampler reads them from a recorded NVML (two H200s shaped after the one the GPU
    machine recorded: tests/recorded_nvml.py), vLLM at tensor parallel 2, and the vLLM parts that refused
    vLLM 0.26.0's internals named in the metrics panel (the verdicts the H200 machine's /metrics gave)."""
    from tests.console.recorded import RecordedSampler
    from tests.recorded_nvml import readings

    extra = (Path(__file__).parent.parent / "fixtures" / "metrics" / "plugins_refused_vllm026.txt").read_text()
    sampler = RecordedSampler(count=12, gpu_readings=readings(), metrics_extra=extra)
    status = dataclasses.replace(STATUS, profile="embedded-gpu", knobs={"gpus": 2})
    assert snap_compare(make_app(status=status, sampler=sampler), terminal_size=(120, 36), run_before=settle)
