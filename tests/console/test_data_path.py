"""The console's one data path: sources post sealed typed messages carrying frozen views; screens and widgets
run no timers and no workers; the app renders only when something changed."""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

import pytest

from frank.console import messages, state
from frank.console.screens.launch_episodes import EpisodesLaunch
from frank.console.sources.base import Source
from frank.console.state import CampaignView, ConsoleState
from frank.console.widgets.engine_panel import EnginePanel
from frank.engine.records import ExitRecord
from tests.console.conftest import READY, fixed_engine, wait_until

CONSOLE = Path(messages.__file__).parent
POLLING_CALLS = {"set_interval", "set_timer", "run_worker"}


def _offences(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", None))
            if name in POLLING_CALLS:
                found.append(f"{path.name}:{node.lineno}: {name}()")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                if getattr(target, "id", getattr(target, "attr", None)) == "work":
                    found.append(f"{path.name}:{node.lineno}: @work on {node.name}")
    return found


def test_no_screen_or_widget_runs_a_timer_or_a_worker():
    files = sorted((CONSOLE / "screens").glob("*.py")) + sorted((CONSOLE / "widgets").glob("*.py"))
    assert len(files) > 10
    offences = [o for f in files for o in _offences(f)]
    assert offences == []


def test_the_structural_check_finds_a_poller(tmp_path):
    """The check above can fail: a screen that re-arms its own poll is found."""
    bad = tmp_path / "bad_screen.py"
    bad.write_text(
        "from textual import work\nclass S:\n    @work(thread=True)\n    def poll(self):\n"
        "        self.set_timer(1.0, self.poll)\n"
    )
    assert sorted(_offences(bad)) == ["bad_screen.py:4: @work on poll", "bad_screen.py:5: set_timer()"]


def _source_messages() -> list[type]:
    return [
        c
        for c in vars(messages).values()
        if isinstance(c, type) and issubclass(c, messages.SourceMessage) and c is not messages.SourceMessage
    ]


def test_every_message_is_a_sealed_dataclass_without_any_fields():
    found = _source_messages()
    assert len(found) >= 8
    for cls in found:
        assert dataclasses.is_dataclass(cls), cls
        for name, hint in typing.get_type_hints(cls).items():
            if name in {f.name for f in dataclasses.fields(cls)}:
                assert hint is not typing.Any, (cls, name)
    view_classes = [
        c
        for c in vars(state).values()
        if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__module__ == state.__name__
    ]
    assert view_classes and all(c.__dataclass_params__.frozen for c in view_classes)
    for cls in view_classes:
        for name, hint in typing.get_type_hints(cls).items():
            assert hint is not typing.Any, (cls, name)
    message = messages.CampaignRead(CampaignView(name="x"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.view = CampaignView(name="y")
    newer = messages.CampaignRead(CampaignView(name="z"))
    assert message.can_replace(newer) and not message.can_replace(messages.EpisodesRead(state.EpisodesView()))


class CountingSource(Source[CampaignView]):
    name = "counting"

    def __init__(self, post, views):
        super().__init__(post)
        self.views = list(views)

    def read(self) -> CampaignView:
        return self.views.pop(0)

    def message(self, view):
        return messages.CampaignRead(view)

    def interval(self) -> float:
        return 0.0


def test_a_source_posts_only_what_changed():
    posted = []
    same = CampaignView(name="a")
    source = CountingSource(posted.append, [same, CampaignView(name="a"), CampaignView(name="b")])
    for _ in range(3):
        source.read_once()
    assert [m.view.name for m in posted] == ["a", "b"]  # the equal second read posted nothing


async def test_a_sources_message_is_rendered_without_any_screen_timer(make_app):
    """The engine source's message (posted from its thread) reaches the dashboard through the app's state."""
    import threading

    app = make_app(status=READY)
    async with app.run_test(size=(120, 36)) as pilot:
        panel = app.screen.query_one(EnginePanel)
        assert await wait_until(pilot, lambda: "● ready" in panel.markup_text)
        crashed = dataclasses.replace(READY, state="crashed", exit=ExitRecord(returncode=3))
        thread = threading.Thread(target=lambda: app.post_message(messages.EngineRead(fixed_engine(crashed))))
        thread.start()
        thread.join()
        assert await wait_until(pilot, lambda: "● crashed" in panel.markup_text)
        assert "exit code 3" in panel.markup_text
        assert app.state.engine.status is not None and app.state.engine.status.state == "crashed"
        own = [t for t in app.screen._timers if getattr(t, "name", "") != "screen_update"]  # (Textual's paint)
        assert own == []  # the screen holds no timer of its own


async def test_nothing_changed_means_nothing_rendered(make_app):
    app = make_app(status=READY)
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_until(pilot, lambda: app.state.telemetry.snapshot is not None)
        await pilot.pause(0.3)
        renders = []
        screen = app.screen
        original = screen.render_state
        screen.render_state = lambda s: (renders.append(s), original(s))  # type: ignore[method-assign]
        app.telemetry_source.poll_now()  # a read with no new sample posts nothing
        await pilot.pause(0.5)
        assert renders == []
        app.services.sampler.advance()  # a new sample: one render
        assert await wait_until(pilot, lambda: len(renders) == 1)
        await pilot.pause(0.3)
        assert len(renders) == 1


async def test_episodes_launch_asks_for_the_suite_and_the_draws(make_app):
    app = make_app(status=READY)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("6")
        assert await wait_until(pilot, lambda: len(app.state.episodes.suites) >= 2, timeout_s=10)
        launched = []
        app.episodes.start = lambda suite, draws: launched.append((suite, draws))  # the job itself: see below
        await pilot.press("L")
        assert await wait_until(pilot, lambda: isinstance(app.screen, EpisodesLaunch))
        dialog = app.screen
        plan = str(dialog.query_one("#launch-plan").content)
        assert "1 draw × " in plan and "http://127.0.0.1:8000" in plan
        dialog.query_one("#launch-suite").value = "w01-mini"
        draws = dialog.query_one("#launch-draws")
        draws.value = "0"
        await pilot.pause(0.1)
        assert dialog.query_one("#launch").disabled and "whole number" in str(dialog.query_one("#launch-plan").content)
        draws.value = "3"
        await pilot.pause(0.1)
        mini = next(s for s in app.state.episodes.suites if s.name == "w01-mini")
        assert f"3 draws × {mini.tasks} tasks = {3 * mini.tasks} episodes" in str(
            dialog.query_one("#launch-plan").content
        )
        await pilot.press("enter")
        assert await wait_until(pilot, lambda: launched == [("w01-mini", 3)])
        await pilot.press("L")
        assert await wait_until(pilot, lambda: isinstance(app.screen, EpisodesLaunch))
        await pilot.press("escape")  # cancelled: nothing launched
        await pilot.pause(0.2)
        assert launched == [("w01-mini", 3)]


async def test_episodes_launch_without_an_engine_cannot_start(make_app):
    stopped = dataclasses.replace(READY, state="stopped", url=None, pid=None)
    app = make_app(status=stopped)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("6")
        assert await wait_until(pilot, lambda: len(app.state.episodes.suites) >= 1, timeout_s=10)
        await pilot.press("L")
        assert await wait_until(pilot, lambda: isinstance(app.screen, EpisodesLaunch))
        assert app.screen.query_one("#launch").disabled
        assert "no engine is ready" in str(app.screen.query_one("#launch-plan").content)


def test_console_state_defaults_are_empty():
    s = ConsoleState()
    assert s.engine.state == "unknown" and s.jobs.followed is None and s.busy == ""
