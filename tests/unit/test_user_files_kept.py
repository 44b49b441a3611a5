"""Nothing a user wrote is overwritten (docs/files.md): the console remembers its theme in its own state file
and never writes console.toml; `frank fleet prometheus --fleet OTHER` refuses before it touches the running
server's files; `frank campaign serve` changes a hand-edited profile's defaults in place, every other line
and comment kept; a screen's `--design-out` and `--export` never replace a file that is there."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from frank import paths
from frank.console import config
from frank.errors import WriteError
from frank.fleet import prometheus
from frank.fleet.fleetfile import FleetError, load_fleet

HAND_WRITTEN = """# my console: light in the day
theme = "light"   # the one I like
refresh_s = 2.0
log_tail_lines = 40
colour = "blue"   # not a key frank knows: reported, never "fixed"

[keymap]
"engine.start" = "ctrl+s"
"""


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FRANK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FRANK_THEME", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    return tmp_path / "home"


def _console_toml(text: str) -> Path:
    path = config.config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_theme_flag_with_an_unknown_key_in_console_toml_leaves_the_file_as_written() -> None:
    path = _console_toml(HAND_WRITTEN)
    settings, problems = config.load()
    assert any(p.startswith(f"{path}:5: colour: unknown field") for p in problems), problems
    assert config.startup_theme("high-contrast", settings) == ("frank-high-contrast", None)
    assert path.read_text() == HAND_WRITTEN  # every key, value and comment as the user wrote them
    assert config.choose_theme(None, settings)[0] == "frank-high-contrast"  # remembered, in the state file
    assert config.state_path().parent == paths.state_dir(create=False)


def test_a_pick_is_remembered_until_the_file_s_theme_is_edited() -> None:
    path = _console_toml('theme = "light"\n')
    settings, _ = config.load()
    config.remember_theme("frank-monochrome", settings)
    assert config.choose_theme(None, settings)[0] == "frank-monochrome"
    path.write_text('theme = "dark"\n')  # edited after the pick: the file speaks again
    edited, _ = config.load()
    assert config.choose_theme(None, edited)[0] == "frank-dark"
    assert path.read_text() == 'theme = "dark"\n'


# -- Prometheus --------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fleet(folder: Path, name: str, port: int) -> Path:
    path = folder / name
    path.write_text(
        f'[prometheus]\nlisten = "127.0.0.1:{port}"\nscrape_interval_s = 5\n\n'
        '[hosts.a]\nexporter = "127.0.0.1:1"\nresource = "host-a"\n'
    )
    return path


def test_another_fleet_is_refused_before_the_running_servers_config_is_touched(tmp_path: Path, frank_cli) -> None:
    """A real Prometheus started for one fleet file; `--fleet OTHER` (another address, then the same address
    in another file) exits 1 and the server's config file is byte for byte what it was."""
    if not prometheus.shutil.which("prometheus"):
        pytest.skip("no prometheus on PATH (`make setup` installs it)")
    home = tmp_path / "home"
    mine = _fleet(tmp_path, "fleet.toml", _free_port())
    started = frank_cli("fleet", "prometheus", "--fleet", str(mine), home=home, timeout=120)
    try:
        assert started.returncode == 0, started.stderr
        config_file = home / "data" / "prometheus" / "prometheus.yml"
        before, since = config_file.read_bytes(), config_file.stat().st_mtime_ns
        other_dir = tmp_path / "other"
        other_dir.mkdir()
        for other in (_fleet(other_dir, "fleet.toml", _free_port()), _fleet(other_dir, "same-port.toml", 0)):
            if other.name == "same-port.toml":
                other.write_text(mine.read_text())
            refused = frank_cli("fleet", "prometheus", "--fleet", str(other), home=home, timeout=60)
            assert refused.returncode == 1, refused.stderr
            assert "nothing was written" in refused.stderr and "Traceback" not in refused.stderr
            assert config_file.read_bytes() == before and config_file.stat().st_mtime_ns == since
        again = frank_cli("fleet", "prometheus", "--fleet", str(mine), home=home, timeout=60)
        assert again.returncode == 0 and "reloaded" in again.stdout, again.stderr  # its own file: a reload
    finally:
        frank_cli("fleet", "prometheus", "--stop", home=home, timeout=60)


def test_the_refusal_comes_before_any_write_without_a_server_too(tmp_path: Path, monkeypatch) -> None:
    running = {"pid": 1, "url": "http://127.0.0.1:1", "fleet": str(tmp_path / "a.toml")}
    monkeypatch.setattr(prometheus, "_recorded", lambda: running)
    fleet = load_fleet(_fleet(tmp_path, "b.toml", 2))
    with pytest.raises(FleetError, match="nothing was written"):
        prometheus.start(fleet)
    assert not (paths.data_dir() / "prometheus" / "prometheus.yml").exists()


# -- profiles served, files written by a screen's report ---------------------------------------------------


def test_serving_changes_a_hand_edited_profiles_default_in_place(tmp_path: Path) -> None:
    from frank.campaign import serving
    from frank.engine.profiles import BUILTIN_DIR, load_profile

    text = (BUILTIN_DIR / "llamacpp-cpu.toml").read_text()
    mine = "# my own copy: threads pinned for this box\n" + text.replace(
        "\ndefault = 1\n", "\ndefault = 1  # mine\n", 1
    )
    user = paths.user_profiles_dir()
    user.mkdir(parents=True)
    (user / "llamacpp-cpu.toml").write_text(mine)
    knob = next(k for k in load_profile("llamacpp-cpu").knobs.values() if k.default == 1 and 2 in k.values)
    target, previous = serving.set_defaults("llamacpp-cpu", {knob.name: 2}, action="serve", part="p", campaign="c")
    written = target.read_text()
    assert previous == {knob.name: 1} and load_profile("llamacpp-cpu").knobs[knob.name].default == 2
    changed = [(a, b) for a, b in zip(mine.splitlines(), written.splitlines(), strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1].startswith("default = 2"), changed  # one line; comments kept
    assert written.startswith("# my own copy")


def test_a_screens_design_out_and_export_never_replace_a_file(tmp_path: Path, home: Path, frank_cli) -> None:
    from tests.unit.test_experiment_screen import _screen_run

    run = _screen_run(tmp_path)
    edited = tmp_path / "confirm.toml"
    edited.write_text("# my edits\n")
    record = tmp_path / "rec.json"
    out = frank_cli("experiment", "screen", "--report", run.run_id, "--design-out", str(edited), home=home)
    assert out.returncode == 1 and f"{edited}: already exists and is not overwritten" in out.stderr, out.stderr
    assert edited.read_text() == "# my edits\n"
    first = frank_cli("experiment", "screen", "--report", run.run_id, "--export", str(record), home=home)
    assert first.returncode == 0, first.stderr
    again = frank_cli("experiment", "screen", "--report", run.run_id, "--export", str(record), home=home)
    assert again.returncode == 0, again.stderr  # the very same record: nothing to refuse
    record.write_text(record.read_text().replace('"run_id"', '"run_id_note": "mine",\n "run_id"', 1))
    kept = record.read_text()
    with pytest.raises(WriteError, match="already exists and is not overwritten"):
        paths.write_new(record, "{}\n")
    assert record.read_text() == kept
