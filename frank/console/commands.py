"""The command palette (ctrl+p): every console action, each knob value, each theme, each screen.

Hits call the same app actions as the keys, so read-only mode and confirmations apply here too.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

from frank.console import themes

# (title, help, action) for the app's fixed actions.
ACTIONS: tuple[tuple[str, str, str], ...] = (
    ("Engine: start", "start the engine with the profile's saved knobs", "engine_start"),
    ("Engine: stop", "stop the engine (asks first)", "engine_stop"),
    ("Engine: restart", "restart the engine with its current knobs (asks first)", "engine_restart"),
    ("Engine: toggle region cache", "flip the live region_cache knob on/off", "toggle_region_cache"),
    ("Engine: knobs…", "choose a knob value (live or by restart)", "knobs"),
    ("Go: dashboard", "engine, GPUs, CPU pool, metrics, log tail", "switch_mode('dashboard')"),
    ("Go: replays", "workloads, launch a replay, every job (running ones first)", "switch_mode('replays')"),
    ("Go: experiments", "designs, registered runs, live block board", "switch_mode('experiments')"),
    ("Go: logs", "the engine log, searchable", "switch_mode('logs')"),
    ("Go: campaign", "parts, evidence, revert rules and their last check", "switch_mode('campaign')"),
    ("Go: episodes", "task suites, launch draws, the live episode", "switch_mode('episodes')"),
    ("Episodes: launch…", "asks for the suite and the draws; a detached job", "episodes_launch"),
    ("Fidelity: measure the running engine", "a detached job (frank jobs list); again to cancel it", "fidelity"),
    ("Replay: launch selected workload", "a detached job: survives the console and SSH", "replay_launch"),
    ("Job: cancel the followed job", "it stops after the request in flight; resumable (asks first)", "replay_cancel"),
    ("Experiment: register selected design", "freeze a design and draw its order", "experiment_register"),
    ("Experiment: run / resume selected run", "runs detached: survives the console and SSH", "experiment_run"),
    ("Help: keys", "every key and its binding id", "help"),
    ("Theme: next", "cycle the themes (remembered)", "cycle_theme"),
    ("Quit (engine keeps running)", "leave the engine and any experiment running", "quit"),
    ("Quit and stop the engine", "asks first", "quit_stop"),
)


def _entries(app: Any) -> Iterator[tuple[str, str, Any]]:
    for title, help_text, action in ACTIONS:
        yield title, help_text, partial(app.run_action, action)
    for name in themes.THEMES:
        yield f"Theme: {name}", "switch theme (remembered)", partial(app.set_theme, name)
    status_knobs = dict(getattr(app.engine_status, "knobs", None) or {})
    for knob in app.state.engine.knobs:
        name = knob.name
        how = "restart" if knob.needs_restart else "live"
        for value in knob.values:
            current = " (current)" if str(status_knobs.get(name, knob.default)) == str(value) else ""
            yield (
                f"Knob: {name} = {value}{current}",
                f"{knob.description or name} [{how}]",
                partial(app.set_knob, name, value),
            )


class FrankCommands(Provider):
    async def discover(self) -> Hits:
        for title, help_text, call in _entries(self.app):
            yield DiscoveryHit(title, call, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, call in _entries(self.app):
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), call, help=help_text)
