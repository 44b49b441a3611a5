"""Pilot tests of the console's screens and key paths over the real headless layers (engine stopped)."""

from __future__ import annotations

import dataclasses

from textual.actions import parse as parse_action
from textual.widgets import DataTable, Tabs

from frank.console import config
from frank.console.screens.confirm import ConfirmDialog
from frank.console.screens.dashboard import DashboardScreen
from frank.console.screens.experiments import ExperimentsScreen
from frank.console.screens.help import HelpScreen
from frank.console.screens.knobs import KnobScreen
from frank.console.screens.logs import LogsScreen
from frank.console.screens.replays import ReplaysScreen
from frank.console.widgets.cpu_panel import CpuPanel
from frank.console.widgets.engine_panel import EnginePanel
from frank.console.widgets.gpu_panel import GpuPanel
from frank.console.widgets.metrics_panel import MetricsPanel
from tests.console.conftest import READY, wait_until


def messages(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_modes_switch_by_number_keys(make_app):
    app = make_app(poll=True, offer=True)
    async with app.run_test(size=(120, 36)) as pilot:
        # a stopped engine: the console offers the start first, naming the profile and what it takes
        assert await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        assert "embedded-cpu" in app.screen.body and "first start here takes a minute" in app.screen.body
        await pilot.press("n")  # not now
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)
        assert "[bold]s[/] starts it" in app.screen.query_one(EnginePanel).markup_text  # the next step, in sight
        for key, kind in (("2", ReplaysScreen), ("3", ExperimentsScreen), ("4", LogsScreen), ("1", DashboardScreen)):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, kind), key


async def test_dashboard_adopts_the_controllers_view_of_a_stopped_engine(make_app):
    app = make_app(poll=True)
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_until(pilot, lambda: app.engine_status is not None)
        await pilot.pause(0.1)
        panel = app.screen.query_one(EnginePanel)
        assert app.engine_state == "stopped"
        assert "stopped" in panel.markup_text
        assert "region_cache" in panel.markup_text and "(live)" in panel.markup_text
        assert "num_speculative_tokens" in panel.markup_text and "(restart)" in panel.markup_text


async def test_dashboard_renders_recorded_telemetry(make_app):
    app = make_app(status=READY)
    async with app.run_test(size=(140, 40)) as pilot:
        assert await wait_until(pilot, lambda: app.state.telemetry.snapshot is not None)
        await pilot.pause(0.1)
        screen = app.screen
        gpu_panel = screen.query_one(GpuPanel)
        gpu = gpu_panel.markup_text
        assert "RTX PRO 6000" in gpu and "PCIe tx" in gpu and gpu_panel.border_subtitle == "PCIe gen5 x16"
        cpu = screen.query_one(CpuPanel)
        assert cpu.border_subtitle == "64 cores" and "exl3-cpu-0" in cpu.markup_text
        metrics = screen.query_one(MetricsPanel)
        table = metrics.query_one(DataTable)
        assert table.row_count == 1  # one request seen so far, keyed by its snapshot
        assert "verify step" in metrics._markup and "accept len" in metrics._markup


async def test_request_rows_are_updated_by_key_not_refilled(make_app):
    app = make_app(status=READY)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause(0.1)
        sampler = app.services.sampler

        async def next_sample() -> None:  # the telemetry source posts it; the screen renders it
            sampler.advance()
            seq = sampler.latest().seq
            assert await wait_until(pilot, lambda: app.state.telemetry.snapshot.seq == seq)

        for _ in range(10):
            await next_sample()
        await pilot.pause(0.1)
        table = app.screen.query_one(MetricsPanel).query_one(DataTable)
        keys_before = [k.value for k in table.rows]
        assert len(keys_before) == 8  # the newest 8 requests
        await next_sample()
        await pilot.pause(0.05)
        keys_after = [k.value for k in table.rows]
        assert keys_after[:-1] == keys_before[1:]  # one dropped, one added; the rest kept in place


async def test_narrow_terminal_tabs_the_panels(make_app):
    app = make_app(status=READY)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        screen = app.screen
        assert screen.has_class("-narrow")
        assert screen.query_one(Tabs).display
        assert screen.query_one("#metrics").display and not screen.query_one("#gpu").display
        await pilot.press("g")
        await pilot.pause(0.1)
        assert screen.query_one("#gpu").display and not screen.query_one("#metrics").display
        await pilot.press("p")
        await pilot.pause(0.1)
        assert screen.query_one("#cpu").display and not screen.query_one("#gpu").display
        await pilot.resize_terminal(200, 50)
        await pilot.pause(0.2)
        assert not screen.has_class("-narrow")
        assert all(screen.query_one(f"#{n}").display for n in ("metrics", "gpu", "cpu", "log"))


async def test_help_lists_keys_with_binding_ids(make_app):
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = "\n".join(str(s.render()) for s in app.screen.query("Static"))
        for binding_id in ("engine.start", "engine.stop", "engine.region_cache", "mode.logs", "mode.fleet", "app.quit"):
            assert binding_id in text
        assert "under [keymap] in" in text  # the remap hint names its table (not swallowed as markup)
        assert "? f1" in text and "question_mark" not in text  # help's own key, as the footer shows it
        from tests.console.test_snapshots import screen_text

        await pilot.press("end")  # the legend, below the keys: its end, then a page up
        await pilot.pause()
        shown = " ".join(screen_text(app).split())  # its wrapped rows joined, the borders left in
        await pilot.press("pageup")
        await pilot.pause()
        shown += " ".join(screen_text(app).split())
        figures = ("verify step", "accept len", "by position", "front end", "prefill", "TTFT", "cpu wait")
        for figure in (*figures, "cpu compute", "gpu stall", "cpu pool", "placement", "–"):
            assert f"█ {figure} " in shown, figure  # a row of the legend says what each figure is
        assert "no draft was" in shown and "engine exports no acceptance" in shown  # why a figure is "–"
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)


async def test_a_keymap_of_the_old_region_cache_binding_id_still_remaps_it(make_app):
    from frank.console import config

    app = make_app(settings=config.Settings(keymap={"frank.plugins.region_cache": "C"}))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        text = "\n".join(str(s.render()) for s in app.screen.query("Static"))
        row = next(line for line in text.splitlines() if "engine.region_cache" in line)
        assert " C " in row and "cache" in row  # help shows the remapped key under the new id


async def test_stop_asks_first_and_no_keeps_the_engine(make_app):
    app = make_app(status=READY)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)
        assert app.busy == "" and not any("stopped" in m for m in messages(app))
        await pilot.press("x", "y")  # yes: the real controller stops (nothing runs: returns stopped)
        assert await wait_until(pilot, lambda: any("engine stopped" in m for m in messages(app)))


async def test_restart_knob_asks_first_live_knob_does_not(make_app):
    app = make_app(status=READY)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("k")
        await pilot.pause()
        assert isinstance(app.screen, KnobScreen)
        options = app.screen.query_one("OptionList")
        ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
        target = ids.index("num_speculative_tokens\x002")
        options.highlighted = target
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog)
        assert "restart" in str(app.screen.body).lower()
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)


# What a read-only console may still do: look around. Any other action a key or the palette reaches must be
# disabled there; a new action is either added here (it changes nothing) or disabled.
VIEW_ONLY = {
    "switch_mode",
    "help",
    "cycle_theme",
    "set_theme",
    "quit",
    "command_palette",
    "panel",
    "focus_next",
    "follow",
    "open_run",
    "reload",
    "search",
    "next_match",
    "prev_match",
    "end",
    "top",
    "close_search",
    "campaign_watch",  # reads the campaign again; the read-only source runs no check that could revert
    "menu",  # the replays screen's menu or its followed job (narrow)
    "experiment_report",  # a run's report, read
}


def _palette_actions(app) -> set[str]:
    """The action each palette entry runs: app.run_action(NAME) or an app method called directly."""
    from frank.console.commands import _entries

    names = set()
    for _title, _help, call in _entries(app):
        if call.func == app.run_action:
            names.add(parse_action(call.args[0])[1])
        else:
            names.add(call.func.__name__)
    return names


async def test_read_only_disables_every_action(make_app):
    app = make_app(read_only=True, status=READY)
    async with app.run_test(size=(120, 36)) as pilot:
        app_actions = {parse_action(b.action)[1] for b in app.BINDINGS} | _palette_actions(app)
        assert {"set_knob", "episodes_launch", "engine_start"} <= app_actions  # the palette's knobs and launch
        for mode in app.MODES:
            app.switch_mode(mode)
            await pilot.pause()
            for binding in type(app.screen).BINDINGS:
                target, action, _ = parse_action(binding.action)
                if target == "app":
                    app_actions.add(action)
                elif action not in VIEW_ONLY:
                    assert app.screen.check_action(action, ()) is None, f"{mode} screen: {action}"
        app.switch_mode("dashboard")
        await pilot.pause()
        for action in sorted(app_actions - VIEW_ONLY):
            assert app.check_action(action, ()) is None, action
        for action in sorted(app_actions & VIEW_ONLY):
            assert app.check_action(action, ()), action
        await pilot.press("x", "c", "k")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)  # no dialog opened
        app.set_knob("region_cache", "off")  # the palette's path
        await pilot.pause()
        assert any("read-only" in m for m in messages(app))
        assert "read-only" in app.sub_title


async def test_theme_cycles_and_is_remembered(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        before = app.theme
        await pilot.press("t")
        await pilot.pause()
        assert app.theme != before and app.theme.startswith("frank-")
        saved, problems = config.load()
        assert problems == [] and config.choose_theme(None, saved)[0] == app.theme  # the next start takes it
        assert not config.config_path().exists()  # remembered in the console's state file, not in console.toml


async def test_start_failure_is_a_notification_not_a_traceback(make_app, monkeypatch, tmp_path):
    # A profile whose python does not exist: the controller refuses with a FrankError naming the field.
    monkeypatch.setenv("FRANK_ENGINE_PYTHON", str(tmp_path / "no-such-python"))
    app = make_app(poll=True, offer=True)
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog))  # the start offer
        await pilot.press("y")  # taken: the start fails
        for _ in range(60):
            await pilot.pause(0.05)
            if any("does not exist" in m for m in messages(app)):
                break
        assert any("python" in m and "does not exist" in m for m in messages(app))
        assert app.busy == "" and app.is_running


async def test_quit_leaves_the_engine_alone(make_app):
    app = make_app(status=READY)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0
    assert app.busy == ""  # no stop was issued


async def test_palette_offers_every_action_and_knob(make_app):
    from frank.console.commands import ACTIONS, _entries

    app = make_app(status=READY)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        titles = [t for t, _, _ in _entries(app)]
        for title, *_ in ACTIONS:
            assert title in titles
        assert "Knob: region_cache = on (current)" in titles
        assert "Knob: num_speculative_tokens = 8" in titles
        assert "Theme: frank-monochrome" in titles
        # every app action named in the palette exists
        for _, _, action, _ in ACTIONS:
            name = action.split("(")[0]
            assert hasattr(app, f"action_{name}"), name


def write_config(text: str) -> None:
    """console.toml as a user writes it (frank itself never writes it)."""
    path = config.config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_config_errors_name_the_file_and_field(tmp_path, monkeypatch):
    monkeypatch.setenv("FRANK_HOME", str(tmp_path))
    path = config.config_path()
    path.parent.mkdir(parents=True)
    path.write_text('theme = "purple"\nrefresh_s = 0\n')
    settings, problems = config.load()
    assert settings == config.Settings()
    assert any(str(path) in p and "theme" in p for p in problems)
    assert any("refresh_s" in p for p in problems)
    path.write_text("theme = [")
    _, problems = config.load()
    assert problems and str(path) in problems[0]


def test_theme_choice_flag_env_and_no_color(tmp_path, monkeypatch):
    monkeypatch.setenv("FRANK_HOME", str(tmp_path))
    monkeypatch.delenv("FRANK_THEME", raising=False)
    settings = config.Settings()
    assert config.choose_theme("light", settings) == ("frank-light", None)
    assert config.choose_theme("nope", settings)[1].startswith("--theme")
    monkeypatch.setenv("NO_COLOR", "1")
    assert config.choose_theme(None, settings)[0] == "frank-monochrome"
    monkeypatch.setenv("FRANK_THEME", "hc")
    assert config.choose_theme(None, settings)[0] == "frank-high-contrast"
    saved = dataclasses.replace(settings, theme="frank-light", keymap={"engine.start": "S"})
    write_config('theme = "frank-light"\n[keymap]\n"engine.start" = "S"\n')
    assert config.load()[0] == saved


async def test_keymap_remaps_a_binding_by_id(make_app, tmp_path):
    write_config('[keymap]\n"mode.logs" = "f4"\n')
    settings, _ = config.load()
    app = make_app()
    app.settings = settings
    app.set_keymap(settings.keymap)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("f4")
        await pilot.pause()
        assert isinstance(app.screen, LogsScreen)


async def test_wide_terminal_shows_every_panel(make_app):
    app = make_app(status=READY)
    async with app.run_test(size=(250, 60)) as pilot:
        await pilot.pause(0.2)
        screen = app.screen
        assert not screen.has_class("-narrow") and not screen.query_one(Tabs).display
        for name in ("engine", "metrics", "gpu", "cpu", "run", "log"):
            widget = screen.query_one(f"#{name}")
            assert widget.display and widget.region.width > 50, name


async def test_a_silent_engine_never_freezes_the_screen(make_app):
    """An engine that accepts connections and never answers (SilentMetricsServer: the real one cannot be
    made to hang on demand): the sampler's scrape and the status poll block in their threads, keys work."""
    import socket
    import threading
    import time as _time

    from frank.telemetry.sampler import Sampler, static_target

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:  # SilentMetricsServer: accept, read nothing, answer nothing
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    # A scrape hangs for 30 s: a console that waited for it on the event loop would freeze that long.
    sampler = Sampler(static_target(url), period_s=1.0, gpu=False, scrape_timeout_s=30.0)
    app = make_app(sampler=sampler, status=dataclasses.replace(READY, url=url))
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.pause(1.5)  # the first scrape is now stuck
            for key, kind in (("4", LogsScreen), ("1", DashboardScreen), ("2", ReplaysScreen)):
                t0 = _time.perf_counter()
                await pilot.press(key)
                assert isinstance(app.screen, kind)
                assert _time.perf_counter() - t0 < 10.0, key  # generous: CI has 2 busy cores
    finally:
        stop.set()
        for conn in held:
            conn.close()
        listener.close()


async def test_the_metrics_panel_names_the_parts_that_refused_their_vllm(make_app):
    from pathlib import Path

    from tests.console.recorded import RecordedSampler

    extra = (Path(__file__).parent.parent / "fixtures" / "metrics" / "plugins_refused_vllm026.txt").read_text()
    app = make_app(status=READY, sampler=RecordedSampler(count=3, metrics_extra=extra))
    async with app.run_test(size=(140, 40)) as pilot:
        assert await wait_until(pilot, lambda: app.state.telemetry.snapshot is not None)
        await pilot.pause(0.1)
        markup = app.screen.query_one(MetricsPanel)._markup
        assert "parts off on vLLM 0.26.0" in markup
        assert "block-hash-memo, held-prompt, idle-release, shm-idle" in markup and "region-cache" not in markup
    plain = make_app(status=READY)  # an engine whose parts all loaded: no such line
    async with plain.run_test(size=(140, 40)) as pilot:
        assert await wait_until(pilot, lambda: plain.state.telemetry.snapshot is not None)
        await pilot.pause(0.1)
        assert "parts off" not in plain.screen.query_one(MetricsPanel)._markup


def test_a_config_with_an_unknown_key_is_refused_with_its_line(tmp_path, monkeypatch):
    """Every problem at once, each FILE:LINE: field; a misspelt key is not silently ignored."""
    monkeypatch.setenv("FRANK_HOME", str(tmp_path))
    path = config.config_path()
    path.parent.mkdir(parents=True)
    path.write_text('theme = "light"\nrefresh_sec = 2\nlog_tail_lines = 500\n\n[keymap]\n"engine.start" = 5\n')
    settings, problems = config.load()
    assert settings == config.Settings()
    assert problems[0].startswith(f"{path}:3: log_tail_lines: must be at most 200"), problems
    assert any(p.startswith(f'{path}:6: keymap."engine.start": expected a string') for p in problems), problems
    assert any(p.startswith(f"{path}:2: refresh_sec: unknown field (known: theme, ") for p in problems), problems
