"""Serving a part: its knob values become the profile's defaults, through a user profile override.

A user profile of the same name replaces the built-in one (frank/engine/profiles.py), so `serve` writes
`<config>/profiles/<profile>.toml`: the profile as it loads now (the user's own file if there is one, else
the built-in), with the part's knob defaults changed in place (`default = ...` on its line: every other line
and comment of a hand-edited profile stays; tomlfile.with_values), validated before it replaces anything.
`revert` puts the defaults recorded at `serve` back. Which starts see the new defaults is spelled out by
`takes_effect`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from frank import paths, tomlfile
from frank.campaign.parts import CampaignError
from frank.campaign.results import TakesEffect
from frank.engine.profiles import BUILTIN_DIR, ProfileError, load_profile, parse_profile, profile_files
from frank.engine.records import RUNNING_STATES

HEADER = (
    "# Written by `frank campaign {action} {part}` ({campaign}): the knob defaults below are what the\n"
    "# campaign serves. Change them with `frank campaign serve|revert`, not by hand.\n"
)


def set_defaults(
    profile_name: str, values: dict[str, Any], *, action: str, part: str, campaign: str
) -> tuple[Path, dict[str, Any]]:
    """Write the override with `values` as knob defaults; return its path and the defaults it replaced."""
    try:
        profile = load_profile(profile_name)
        profile.resolve_knobs(values)  # every knob exists, every value is allowed
    except ProfileError as exc:
        raise CampaignError(f"part {part}: {exc}") from None
    source = profile_files()[profile_name]
    original = tomlfile.read_text(source, CampaignError)
    data = tomlfile.parse(original, source, CampaignError)
    previous = {name: data["knobs"][name]["default"] for name in values}
    # the defaults changed where they are written: every other line (and comment) of the file stays
    fields: dict[tomlfile.Path_, Any] = {("knobs", n, "default"): profile.knobs[n].parse(v) for n, v in values.items()}
    text = tomlfile.with_values(original, fields, source, CampaignError)
    target = paths.user_profiles_dir() / f"{profile_name}.toml"
    try:
        parse_profile(tomlfile.parse(text, target, CampaignError), target)  # never write a profile that would not load
    except ProfileError as exc:
        raise CampaignError(f"part {part}: the override would not load: {exc}") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.parent == BUILTIN_DIR:  # a new user profile: the built-in's text, with a note of who wrote it
        text = (
            HEADER.format(action=action, part=part, campaign=campaign)
            + f"# Copied from the built-in {source.name}.\n"
            + text
        )
    paths.write_private(target, text)
    return target, previous


def takes_effect(profile_name: str, values: dict[str, Any]) -> TakesEffect:
    """Which starts use the new defaults, and what still overrides them."""
    from frank.engine.controller import EngineController
    from frank.engine.state import StateFiles

    notes = [
        f"the next `frank engine start` of profile {profile_name} (the console's start too), and every "
        f"experiment cell of {profile_name} whose arm does not set {', '.join(sorted(values))}",
        "not `frank engine restart`: a restart keeps the running engine's knob values",
    ]
    controller = EngineController()
    saved = StateFiles.read_json(controller.files.saved_knobs_path(profile_name)) or {}
    for name, value in values.items():
        if name in saved and saved[name] != value:
            notes.append(
                f"the saved knob value {name}={saved[name]} (`frank engine knob` while stopped) still wins "
                f"at the next start: set it with `frank engine knob {name} {value}`"
            )
    running = None
    st = controller.status(check_health=False)
    if st.state in RUNNING_STATES and st.profile == profile_name:
        differ = {k: st.knobs.get(k) for k, v in values.items() if st.knobs.get(k) != v}
        running = {"pid": st.pid, "knobs": st.knobs, "differs": differ}
        if differ:
            live = {k for k in differ if load_profile(profile_name).knobs[k].apply == "live"}
            notes.append(
                f"the running engine (pid {st.pid}) keeps {differ} until its next start"
                + (f"; apply {', '.join(sorted(live))} now with `frank engine knob NAME VALUE`" if live else "")
            )
    return TakesEffect(profile_name, notes[0], tuple(notes[1:]), running)
