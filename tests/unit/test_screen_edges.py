"""Screens at their edges: a screen file's errors point into the file (its line and the field as the user
wrote it, never the arms frank derives), and a screen is never evidence: `frank campaign init`, `adopt` and
the console's campaign actions refuse a screen run, record or file with the reason, exit 1, and record
nothing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from frank.campaign import actions
from frank.campaign.ledger import history_path
from frank.campaign.parts import CampaignError
from frank.experiments.screen import load_screen
from frank.experiments.tables import DesignError
from tests.unit.test_experiment_screen import SCREEN, _screen_run

REPO = Path(__file__).resolve().parents[2]
REFUSAL = "a screen picks a candidate; only a registered confirmation decides"


@pytest.fixture(autouse=True)
def frank_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FRANK_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.parametrize(
    ("old", "new", "field", "says"),
    [
        ("knobs = { cpu_threads = 1 }", "knobs = { no_such_knob = 1 }", "candidates[0].knobs.no_such_knob", "no knob"),
        ("knobs = { cpu_threads = 1 }", "knobs = { cpu_threads = 3 }", "candidates[0].knobs.cpu_threads", "3 is not"),
        ("cpu_poll = [50, 100]", "num_speculative_tokens = [1, 2]", "grid.num_speculative_tokens", "no knob"),
        ("cpu_poll = [50, 100]", "cpu_poll = [50, 7]", "grid.cpu_poll[1]", "7 is not one of"),
        (
            "knobs = { cpu_threads = 2, cpu_poll = 0 }",
            "knobs = { cpu_threads = 2, cpu_poll = 9 }",
            "control.knobs.cpu_poll",
            "9",
        ),
    ],
)
def test_a_screens_knob_errors_name_the_field_as_written(tmp_path: Path, old: str, new: str, field: str, says: str):
    text = SCREEN.replace(old, new)
    assert text != SCREEN
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(DesignError) as err:
        load_screen(path, check_profiles=True)
    first = str(err.value).splitlines()[0]
    assert first.startswith(f"{path}:{line_of(text, new)}: {field}: ")
    assert says in first and "arms[" not in str(err.value), str(err.value)


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ("cpu_poll = [50, 100]", "cpu_poll = [0, 50]", "grid: 'cpu_poll.0' (cpu_poll=0) is the control's setting"),
        ("cpu_poll = [50, 100]", "cpu_poll = []", "grid.cpu_poll: expected an array of single values, got []"),
        ('name = "one-thread"', 'name = "cpu_poll.50"', "grid: 'cpu_poll.50' (cpu_poll=50) is used twice (also"),
    ],
)
def test_a_grids_errors_point_at_the_grid_not_at_derived_candidates(tmp_path: Path, old: str, new: str, says: str):
    text = SCREEN.replace(old, new)
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(DesignError) as err:
        load_screen(path)
    assert re.search(rf"{re.escape(str(path))}:\d+: {re.escape(says)}", str(err.value)), str(err.value)
    assert "candidates[1]" not in str(err.value) and "candidates[2]" not in str(err.value)


def test_a_screen_that_is_not_utf8_or_is_dev_zero_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_bytes(SCREEN.encode().replace(b"one-thread", b"one-thr\xe9ad"))
    with pytest.raises(DesignError, match=rf"^{re.escape(str(path))}:\d+: not UTF-8 text: byte \d+ of the line"):
        load_screen(path)
    link = tmp_path / "zero.toml"
    link.symlink_to("/dev/zero")
    with pytest.raises(DesignError, match=rf"^{re.escape(str(link))}: is a character device, not a regular file$"):
        load_screen(link)


# -- never evidence ----------------------------------------------------------------------------------------

PART = """version = 1
name = "c"

[[parts]]
name = "pool"
profile = "llamacpp-cpu-moe"
knobs = {{ cpu_threads = 1 }}
state = "testing"
{design}
[[parts.evidence]]
state = "testing"
{evidence}
"""


def _campaign(tmp_path: Path, design: str, evidence: str) -> Path:
    path = tmp_path / "campaign.toml"
    path.write_text(PART.format(design=design, evidence=evidence))
    return path


def test_init_refuses_a_screen_run_as_evidence_and_records_nothing(tmp_path: Path, frank_cli) -> None:
    run = _screen_run(tmp_path)
    path = _campaign(tmp_path, "", f'run = "{run.run_id}"')
    result = frank_cli("campaign", "init", "--file", str(path), timeout=120)
    assert result.returncode == 1, result.stderr
    line = line_of(path.read_text(), "run = ")
    assert f"{path}:{line}: parts[0].evidence[0].run: run {run.run_id} is a screen: {REFUSAL}" in result.stderr
    assert "Traceback" not in result.stderr and not history_path(path).exists()


@pytest.mark.parametrize("what", ["screen file", "screen record"])
def test_adopt_and_the_console_refuse_a_part_added_with_a_screen(tmp_path: Path, what: str) -> None:
    """A recorded campaign gets a part whose design is a screen (or whose results are a screen's record):
    `adopt` (the CLI's and the console's call) refuses it before anything is appended to the history."""
    screens = REPO / "frank" / "experiments" / "screens"
    (tmp_path / "s.toml").write_text((screens / "cpu-pool-local.toml").read_text())
    (tmp_path / "r.json").write_text((screens / "cpu-pool-h200.json").read_text())
    path = _campaign(tmp_path, "", 'policy = "try it"')
    actions.init(path)
    before = history_path(path).read_bytes()
    added = 'design = "s.toml"\n' if what == "screen file" else ""
    extra = PART.split("[[parts]]", 1)[1].format(
        design=added, evidence='policy = "x"' if added else 'results = "r.json"'
    )
    path.write_text(path.read_text() + "\n[[parts]]" + extra.replace('name = "pool"', 'name = "pool-2"'))
    with pytest.raises(CampaignError, match=rf"{re.escape(REFUSAL)}"):
        actions.adopt("pool-2", path)
    refused = _console_adopt(path, "pool-2")
    assert REFUSAL in refused
    assert history_path(path).read_bytes() == before  # no part_added, no adopt


class _Host:
    """Enough of the console's Host for its campaign actions: asks are answered yes, workers run at once, and
    a failure is kept as the notification the app would show."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def guard(self, what: str) -> bool:
        return True

    def confirm(self, title: str, body: str, then: Any, yes: str = "Yes") -> None:
        then()

    def run_worker(self, work: Any, **kw: Any) -> None:
        try:
            work()
        except Exception as exc:  # the app's on_worker_state_changed notifies a failed worker
            self.notes.append(str(exc))

    def call_from_thread(self, then: Any, *args: Any) -> None:
        then(*args)

    def notify(self, message: str, **kw: Any) -> None:
        self.notes.append(message)

    def read_campaign(self) -> None:
        pass

    def switch_mode(self, mode: str) -> None:
        pass


def _console_adopt(path: Path, part: str) -> str:
    from frank.console.actions.campaign import CampaignActions
    from frank.console.state import CampaignPart

    host = _Host()
    selected = CampaignPart(part, "testing", "", "", "", "", "", "", "")
    CampaignActions(host, str(path)).act("adopt", selected)  # type: ignore[arg-type]  # the fake host
    return "\n".join(host.notes)


def test_a_screen_record_named_as_results_is_refused_by_status_too(tmp_path: Path, frank_cli) -> None:
    record = REPO / "frank" / "experiments" / "screens" / "cpu-pool-h200.json"
    (tmp_path / "r.json").write_text(record.read_text())
    path = _campaign(tmp_path, "", 'results = "r.json"')
    result = frank_cli("campaign", "status", "--file", str(path), "--json", timeout=120)
    assert result.returncode == 1 and REFUSAL in result.stderr, result.stderr
