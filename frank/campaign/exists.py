"""A campaign file checked against what it names (at init and on every load of the ledger): each part's
profile exists and takes the part's knobs and values, each piece of evidence names a registered run of the
part's design or a results file that is there, and each revert rule watches a measure the part's engine
kind gives. Parsing (parts.py) checks the file alone; this checks it against the machine. Every refusal
names the file, the line and the field.
"""

from __future__ import annotations

from collections.abc import Callable

from frank import readfile, tomlfile
from frank.campaign.parts import Campaign, CampaignError, Part
from frank.errors import FrankError

Refuse = Callable[[str, str], CampaignError]  # (field, message) -> the error naming the file's line


def check_what_it_names(campaign: Campaign) -> None:
    """Refuse the first part that names a profile, knob, run, results file or measure that is not there."""
    lines = tomlfile.KeyLines(tomlfile.read_text(campaign.path, CampaignError))

    def refuse(field: str, message: str) -> CampaignError:
        return tomlfile.refusal(CampaignError, campaign.path, lines, field, message)  # type: ignore[return-value]

    for i, part in enumerate(campaign.parts):
        _check_part(campaign, part, f"parts[{i}]", refuse)


def _check_part(campaign: Campaign, part: Part, at: str, refuse: Refuse) -> None:
    from frank.engine.kinds import kind_of
    from frank.engine.profiles import ProfileError, load_profile
    from frank.experiments.design import MEASURE_NEEDS

    try:
        profile = load_profile(part.profile)
    except ProfileError as exc:
        raise refuse(f"{at}.profile", str(exc)) from None
    for name, value in part.knobs:
        knob = profile.knobs.get(name)
        if knob is None:
            known = ", ".join(sorted(profile.knobs)) or "none"
            raise refuse(f"{at}.knobs.{name}", f"profile {profile.name} has no knob {name!r} (knobs: {known})")
        try:
            knob.parse(value)
        except ProfileError as exc:
            raise refuse(f"{at}.knobs.{name}", str(exc)) from None
    kind = kind_of(profile)
    for j, rule in enumerate(part.revert_rules):
        lacking = kind.lacks.get(MEASURE_NEEDS.get(rule.measure, ""))
        if rule.kind == "measure_worse" and lacking:
            raise refuse(
                f"{at}.revert_rules[{j}].measure",
                f"{rule.measure}: profile {profile.name} is a {kind.label} engine: {lacking}",
            )
    _refuse_screens(campaign, part, at, refuse)
    for j, ev in enumerate(part.evidence):
        if ev.results and not campaign.resolve(ev.results).exists():
            raise refuse(f"{at}.evidence[{j}].results", f"no such file {campaign.resolve(ev.results)}")
        if ev.run:
            _check_run(campaign, part, ev.design, ev.run, f"{at}.evidence[{j}]", refuse)


def _refuse_screens(campaign: Campaign, part: Part, at: str, refuse: Refuse) -> None:
    """A screen (its file, its record) named as a part's design or evidence is refused: it is never evidence."""
    from frank.campaign.evidence import SCREEN_REFUSAL, screen_kind

    refs = [(f"{at}.design", part.design)]
    refs += [
        (f"{at}.evidence[{j}].{k}", getattr(ev, k)) for j, ev in enumerate(part.evidence) for k in ("design", "results")
    ]
    for field, ref in refs:
        what = screen_kind(campaign.resolve(ref)) if ref else None
        if what:
            raise refuse(field, f"{ref} is {what}: {SCREEN_REFUSAL}")


def _check_run(campaign: Campaign, part: Part, design_ref: str, run_id: str, at: str, refuse: Refuse) -> None:
    """The run is registered here and is a run of the evidence's design (default: the part's)."""
    from frank.campaign.evidence import part_design
    from frank.experiments.registry import resolve_run_id

    try:
        folder = resolve_run_id(run_id)
        meta = readfile.read_object(folder / "run.json")
    except FrankError as exc:
        raise refuse(f"{at}.run", f"{run_id!r}: {exc}") from None
    if meta.get("kind") == "screen":
        from frank.campaign.evidence import SCREEN_REFUSAL

        raise refuse(f"{at}.run", f"run {run_id} is a screen: {SCREEN_REFUSAL}")
    if not (design_ref or part.design):
        return
    design, _ = part_design(campaign, part, design_ref)
    if meta.get("design_sha256") != design.sha256:
        raise refuse(
            f"{at}.run",
            f"run {run_id} is of design {str(meta.get('design_sha256'))[:12]}…, not the part's "
            f"{design.name} ({design.sha256[:12]}…)",
        )
