"""Every `frank` command that acts has its entry in the console's command palette (its twin), or a reason
here why the console does not offer it; searching the palette finds the entries by their words."""

from __future__ import annotations

import argparse

from frank.console.cli import build_parser
from frank.console.commands import ACTIONS, campaign_examples, cli_twins
from tests.console.conftest import READY

# The commands with no palette entry, each with the reason.
NO_ENTRY = {
    "profiles": "the console runs one profile (frank --profile P); the engine panel names it and its knobs",
    "model build": "`make run` builds the models before the console opens",
    "model verify": "a check of the model files; a start refuses a damaged model itself",
    "workload check": "checks a file the user wrote, line by line: an editor's step, before the console",
    "workload make": "the replays menu makes the built-in W01 workloads on first use",
    "workload import": "turns the user's files into a workload folder: a step before the console",
    "record": "a proxy in front of an agent, run in its own terminal for as long as the agent runs",
    "experiment analyze": "applies a design's rule to measures taken elsewhere (a CSV): nothing of the console",
    "experiment plan": "a power calculation from an A/A run; the register dialog shows the design's power",
    "bench region-cache": "a series of engine starts that holds the engine for minutes: its designs run from 3",
    "bench part": "likewise: a part's on/off series of engine starts (its design runs from 3)",
    "serve": "the console itself, in a browser",
    "fidelity floor": "two starts of one configuration for a noise floor: a series, like bench",
    "fidelity table": "a table of several engines' floor runs, written for the docs",
    "fidelity sets list": "text sets are files; the fidelity run (f) measures the shipped ones",
    "fidelity sets check": "checks a set file the user wrote: an editor's step",
    "episodes check": "proves a suite's graders without an engine: a suite author's step",
    "experiment noise": "a noise study registers and runs its design as 3 does (g, r); its report is a study "
    "of a finished run's spread, for the CLI",
    "engine fit": "a plan for a GPU budget, printed for the CLI; a start refuses a split that does not fit itself",
    "engine floors": "the floors the fit reads, a record of past starts: the fit prints the one it uses",
}


def leaves(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[str]:
    """Every runnable command: `engine start`, `replay`, `fidelity sets check`, ..."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return [leaf for name, sub in action.choices.items() for leaf in leaves(sub, (*prefix, name))]
    return [" ".join(prefix)]


def test_every_cli_command_has_a_palette_entry_or_a_reason():
    commands = set(leaves(build_parser()))
    twins = cli_twins()
    missing = sorted(c for c in commands if c not in twins and c not in NO_ENTRY)
    assert not missing, f"CLI commands with no palette entry and no reason in NO_ENTRY: {missing}"
    stale = sorted(t for t in twins if t.split(" --")[0] not in commands)
    assert not stale, f"palette entries naming commands the CLI does not have: {stale}"
    both = sorted(c for c in NO_ENTRY if c in twins)
    assert not both, f"NO_ENTRY names commands that have a palette entry now: {both}"
    # the list: screens (run, report, the confirmation design), campaign init, fidelity, fleet
    for twin in ("experiment screen", "experiment screen --report", "experiment screen --design-out"):
        assert twin in twins
    for twin in ("campaign init", "fidelity run", "fleet status", "fleet prometheus"):
        assert twin in twins


async def test_searching_the_palette_finds_screens_and_every_campaign_example(make_app):
    from frank.console.commands import FrankCommands, _entries

    app = make_app(status=READY)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        titles = [t for t, _, _ in _entries(app)]
        for example in campaign_examples():
            assert f"Campaign: init from the example {example}" in titles
        provider = FrankCommands(app.screen)
        found = [str(hit.text) async for hit in provider.search("screen")]
        assert any(t.startswith("Screen: register") for t in found), found
        assert any("confirmation design" in t for t in found), found
        for _, _, action, _ in ACTIONS:  # every entry runs an action the app has
            name = action.split("(")[0]
            assert hasattr(app, f"action_{name}"), name
