"""Snapshot tests (pytest-textual-snapshot; textual is pinned exactly in pyproject.toml) of the main
screens in two themes and at 80x24, from recorded telemetry and a fixed engine status.
Update after an intended change: pytest tests/console/test_snapshots.py --snapshot-update"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.console.conftest import READY
from tests.console.recorded import RecordedSampler

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


# -- every screen at 80x24 and 120x40, from a working session's state (tests/console/realistic.py) ----------

SCREENS = ("dashboard", "replays", "replays-menu", "experiments", "logs", "campaign", "episodes", "fleet", "help")
KEYS = {"logs": ("4",), "help": ("question_mark",), "replays-menu": ("2", "m")}


def session_app(make_app):
    """An app holding a working session's state; its sources read nothing but telemetry and the log (the
    state is the test's, as the sources would post it)."""
    from tests.console.realistic import session

    FIXED_LOG.parent.mkdir(exist_ok=True)
    FIXED_LOG.write_bytes(LOG_DATA.read_bytes())
    app = make_app(status=dataclasses.replace(STATUS, log_path=str(FIXED_LOG)))
    app.state = session(app.state)
    for source in app.sources:
        if source not in (app.telemetry_source, app.log_source):
            source.start = lambda: None  # type: ignore[method-assign]
    return app


def keys_for(name: str) -> tuple[str, ...]:
    from tests.console.realistic import KNOWN

    return KEYS.get(name) or (KNOWN[name][0],)


async def open_screen(pilot, name: str) -> None:
    await settle(pilot)
    for key in keys_for(name):
        await pilot.press(key)
        await pilot.pause(0.3)
    await pilot.pause(0.3)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@pytest.mark.parametrize("name", SCREENS)
def test_every_screen(snap_compare, make_app, name, size, monkeypatch):
    from frank.console import config

    # help names the config file: the same path wherever the test runs
    monkeypatch.setattr(config, "config_path", lambda: Path("/home/op/.config/frank/console.toml"))

    async def go(pilot):
        await open_screen(pilot, name)

    assert snap_compare(session_app(make_app), terminal_size=size, run_before=go)


def screen_text(app) -> str:
    """The screen as the terminal shows it, in plain text (what the snapshot's SVG draws)."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, record=True)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_no_figure_is_cut_on_any_screen(make_app, size):
    """The rows each screen renders hold every known figure whole: 52/135, not 52/1; finished, not finishe."""
    from tests.console.realistic import KNOWN

    app = session_app(make_app)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        for name, (_, figures) in KNOWN.items():
            if name != "replays-menu":
                await pilot.press("1")  # from the dashboard, as a user would (the menu is a key of replays)
                await pilot.pause(0.1)
            for key in keys_for(name):
                await pilot.press(key)
                await pilot.pause(0.3)
            text = screen_text(app)
            if name == "replays" and size == (120, 40):  # room for both draws: the flip in the first one
                figures = (*figures, "draw-1 45/45 ok · 0 failed")
            missing = [f for f in figures if f not in text]
            assert not missing, f"{name} at {size[0]}x{size[1]}: {missing} not shown whole:\n{text}"
        if size == (80, 24):  # the job alone (m goes back from the menu): its state and 8 requests or more
            await pilot.press("2", "m")
            await pilot.pause(0.3)
            assert "● running" in screen_text(app)
            rows = [line for line in screen_text(app).splitlines() if " d1-" in line or " d2-" in line]
            assert len(rows) >= 8, rows


def test_start_offer_on_a_stopped_engine_80x24(snap_compare, make_app):
    """What a console opened on a stopped engine asks first: the profile, what a start takes, the keys."""
    from frank.console.state import StartHint

    status = dataclasses.replace(STATUS, state="stopped", pid=None, url=None, ready_s=None, uptime_s=None, knobs={})
    app = make_app(status=status, sampler=RecordedSampler(cores=2, gpus=0, engine=False), log_tail=[])
    hint = StartHint("vLLM CPU build serving the project's tiny model", "vllm", 42.4, 420.0)
    app.state = dataclasses.replace(app.state, engine=dataclasses.replace(app.state.engine, start=hint))

    async def go(pilot):
        await settle(pilot)
        app.offer_start()
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=(80, 24), run_before=go)
