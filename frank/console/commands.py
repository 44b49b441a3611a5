"""The command palette (ctrl+p): every console action, each knob value, each theme, each screen; every CLI
command that acts has its entry here (its twin), or a reason in tests/console/test_palette.py.

Hits call the same app actions as the keys, so read-only mode and confirmations apply here too.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

from frank.console import themes

# (title, help, action, its CLI twins) for the app's fixed actions. The twins are `frank` sub-commands (with
# the flag that makes the action, if any); tests/console/test_palette.py walks the CLI's commands against them.
ACTIONS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("Engine: start", "start the engine with the profile's saved knobs", "engine_start", ("engine start",)),
    ("Engine: stop", "stop the engine (asks first)", "engine_stop", ("engine stop",)),
    (
        "Engine: restart",
        "restart the engine with its current knobs (asks first)",
        "engine_restart",
        ("engine restart",),
    ),
    ("Engine: toggle region cache", "flip the live region_cache knob on/off", "toggle_region_cache", ("engine knob",)),
    ("Engine: knobs…", "choose a knob value (live or by restart)", "knobs", ("engine knob",)),
    (
        "Go: dashboard",
        "engine status, GPUs, CPU pool, live metrics, log tail",
        "switch_mode('dashboard')",
        ("engine status", "telemetry"),
    ),
    (
        "Go: replays",
        "workloads, launch a replay, every job (running ones first)",
        "switch_mode('replays')",
        ("workload list", "jobs list", "jobs status"),
    ),
    (
        "Go: experiments",
        "designs and screens, registered runs, live block board, the latest fidelity run",
        "switch_mode('experiments')",
        ("experiment list", "experiment status", "fidelity list", "fidelity report"),
    ),
    ("Go: logs", "the engine log, searchable", "switch_mode('logs')", ("engine logs",)),
    (
        "Go: campaign",
        "parts, evidence, revert rules and their last check",
        "switch_mode('campaign')",
        ("campaign status", "campaign history"),
    ),
    (
        "Go: episodes",
        "task suites, launch draws, the live episode",
        "switch_mode('episodes')",
        ("episodes list", "episodes status", "episodes report"),
    ),
    (
        "Go: fleet",
        "every workstation of the fleet file, from its Prometheus",
        "switch_mode('fleet')",
        ("fleet status",),
    ),
    ("Episodes: launch…", "asks for the suite and the draws; a detached job", "episodes_launch", ("episodes run",)),
    (
        "Fidelity: measure the running engine",
        "a detached job (frank jobs list); again to cancel it",
        "fidelity",
        ("fidelity run",),
    ),
    ("Replay: launch selected workload", "a detached job: survives the console and SSH", "replay_launch", ("replay",)),
    (
        "Job: cancel the followed job",
        "it stops after the request in flight; resumable (asks first)",
        "replay_cancel",
        ("jobs cancel",),
    ),
    (
        "Experiment: register selected design",
        "freeze a design and draw its order",
        "experiment_register",
        ("experiment register",),
    ),
    (
        "Experiment: run / resume selected run",
        "runs detached: survives the console and SSH",
        "experiment_run",
        ("experiment run",),
    ),
    ("Experiment: stop the followed run", "the cell in flight is redone on resume", "experiment_stop", ()),
    (
        "Experiment: report of the selected run",
        "effect per block, exact p, the decision (a screen: its pick)",
        "experiment_report",
        ("experiment report", "experiment screen --report"),
    ),
    (
        "Screen: register selected screen",
        "a screen file (listed first with the designs): its order drawn and frozen; r runs it",
        "experiment_register",
        ("experiment screen",),
    ),
    ("Screen: run / resume selected screen run", "runs detached, like a design's run", "experiment_run", ()),
    (
        "Screen: report of the selected screen run",
        "every setting's values, the pick and why",
        "experiment_report",
        ("experiment screen --report",),
    ),
    (
        "Screen: write the confirmation design",
        "the pick's registered confirmation, into your designs (then g registers it)",
        "screen_design",
        ("experiment screen --design-out",),
    ),
    (
        "Campaign: init an empty campaign",
        "campaign.toml in frank's config dir, with its history",
        "campaign_init",
        ("campaign init",),
    ),
    (
        "Campaign: adopt selected part",
        "needs a confirmed registered run (asks first)",
        "campaign('adopt')",
        ("campaign adopt",),
    ),
    (
        "Campaign: serve selected part",
        "its knobs become the profile's defaults (asks first)",
        "campaign('serve')",
        ("campaign serve",),
    ),
    (
        "Campaign: revert selected part",
        "needs a fired revert rule (asks first)",
        "campaign('revert')",
        ("campaign revert",),
    ),
    ("Campaign: check the revert rules now", "the watch over finished runs", "campaign('watch')", ("campaign watch",)),
    (
        "Fleet: start (or reload) its Prometheus",
        "writes the scrape config from the fleet file and starts Prometheus",
        "fleet_prometheus",
        ("fleet prometheus",),
    ),
    ("Help: keys and legend", "every key, its binding id, and what each figure means", "help", ()),
    ("Theme: next", "cycle the themes (remembered)", "cycle_theme", ()),
    ("Quit (engine keeps running)", "leave the engine and any job running", "quit", ()),
    ("Quit and stop the engine", "asks first", "quit_stop", ()),
)


def campaign_examples() -> list[str]:
    from frank.campaign.parts import EXAMPLES_DIR

    return sorted(p.stem for p in EXAMPLES_DIR.glob("*.toml"))


def cli_twins() -> set[str]:
    """Every `frank` sub-command an entry of the palette is the twin of."""
    return {twin for *_, twins in ACTIONS for twin in twins}


def _entries(app: Any) -> Iterator[tuple[str, str, Any]]:
    for title, help_text, action, _ in ACTIONS:
        yield title, help_text, partial(app.run_action, action)
    for example in campaign_examples():
        yield (
            f"Campaign: init from the example {example}",
            f"a copy of the shipped campaign {example} (frank campaign init --example {example})",
            partial(app.run_action, f"campaign_init({example!r})"),
        )
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
