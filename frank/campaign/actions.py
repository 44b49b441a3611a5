"""The campaign's commands: init, status, adopt, serve, revert, history. The CLI and the console call these.

Each state change checks its evidence first and is then appended to the history (fsynced); the campaign
file itself is never rewritten.
- adopt:  a registered run of the part's design (same canonical hash) whose report decides `confirmed`
- serve:  an adopted part (or a passed one with `policy`, a policy call in words); the knob values become
          the profile's defaults through a user profile override (serving.py), and the answer says which
          starts take them
- revert: a served or adopted part, on a revert rule that fired since it was served, or an explicit reason;
          a served part's previous defaults are put back
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from frank import paths, tomlfile
from frank.campaign import serving, watch
from frank.campaign.evidence import check_evidence, confirmed_runs, part_design
from frank.campaign.exists import check_what_it_names
from frank.campaign.ledger import (
    STATE_EVENTS,
    Ledger,
    append_event,
    history_path,
    init_history,
    open_ledger,
    record_new_parts,
)
from frank.campaign.parts import EMPTY, CampaignError, Evidence, Part, example_path, load_campaign
from frank.campaign.results import (
    Adopted,
    AwaitStatus,
    CampaignHistory,
    CampaignStatus,
    FiredCheck,
    Initialized,
    LastCheck,
    PartStatus,
    Reverted,
    RuleStatus,
    Served,
    ServedDefaults,
)

NEXT = {
    "candidate": "register and run its design (frank experiment register DESIGN)",
    "testing": "finish its registered run, then adopt",
    "passed": "adopt: needs a confirmed registered run of its design",
    "adopted": "serve: its knob values become the profile's defaults",
    "served": "watched: every finished run with it is checked against its revert rules",
    "reverted": "nothing: reverted",
    "rejected": "nothing: its registered test did not confirm it (a changed part is a new part with a new design)",
}


def default_path() -> Path:
    return paths.config_dir() / "campaign.toml"


def resolve_path(path: Path | str | None) -> Path:
    return Path(path).expanduser() if path else default_path()


# -- init ---------------------------------------------------------------------------------------------------


def init(path: Path | str | None = None, example: str | None = None) -> Initialized:
    """A new campaign (empty, or a copy of a shipped example), or record an existing file that has no history."""
    target = resolve_path(path)
    if target.exists():
        if example:
            raise CampaignError(f"{target}: already exists; pick another --file for the example")
        campaign = load_campaign(target)
        check_what_it_names(campaign)
        created = False
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        text = tomlfile.read_text(example_path(example), CampaignError) if example else EMPTY
        paths.write_private(target, text)
        try:
            campaign = load_campaign(target)
            check_what_it_names(campaign)
        except CampaignError:
            target.unlink()
            raise
        created = True
    at = init_history(campaign, example)
    return Initialized(
        str(target), str(history_path(target)), created, example, tuple(p.name for p in campaign.parts), at
    )


# -- status ---------------------------------------------------------------------------------------------------


def rule_status(ledger: Ledger, part: Part, pending: Sequence[dict[str, Any]] = ()) -> tuple[RuleStatus, ...]:
    checks = [e for e in ledger.events_for(part.name) if e["event"] == "check"]
    checks += [c for c in pending if c["part"] == part.name]
    out = []
    for rule in part.revert_rules:
        last = None
        for c in reversed(checks):
            found = next((r for r in c["rules"] if r["name"] == rule.name), None)
            if found:
                last = LastCheck(found["outcome"], found["detail"], c["run_kind"], c["run_id"], c["at"])
                break
        params = {
            k: v
            for k, v in rule.__dict__.items()
            if k in ("max_drop", "floor", "measure", "max_worse_pct") and v not in ("", 0.0)
        }
        out.append(RuleStatus(rule.name, rule.kind, rule.description, params, last))
    return tuple(out)


def part_status(
    ledger: Ledger, part: Part, pending: Sequence[dict[str, Any]] = (), recorded: bool = True
) -> PartStatus:
    """One part's state, evidence, rules and what comes next; `pending`: checks not recorded yet."""
    state = ledger.state(part)
    evidence = [check_evidence(ledger.campaign, part, ev) for ev in part.evidence]
    awaiting = awaited(ledger, part)
    for a in awaiting:  # an awaited CSV that is there: decided again, as a test's outcome, never a state
        if a.there and a.path.endswith(".csv"):
            entry = check_evidence(ledger.campaign, part, Evidence(state="testing", results=a.file, note=a.what))
            entry["awaited"] = True
            evidence.append(entry)
    for e in ledger.events_for(part.name):
        if e["event"] in ("adopt", "serve", "revert"):
            evidence.append(
                {
                    "state": STATE_EVENTS[e["event"]],
                    "source": "history",
                    "at": e["at"],
                    "by": e.get("by"),
                    "run_id": e.get("run_id"),
                    "decision": e.get("decision"),
                    "p_fraction": e.get("p_fraction"),
                    "design_sha256": e.get("design_sha256"),
                    "policy": e.get("policy"),
                    "reason": e.get("reason"),
                    "rule": e.get("rule"),
                    "ok": True,
                }
            )
    fired = watch.fired_since_served(ledger, part) if state == "served" else []
    if state == "served":
        fired += [c for c in pending if c["part"] == part.name and c.get("fired")]
    try:
        design_sha = part_design(ledger.campaign, part)[0].sha256 if part.design else None
    except CampaignError:
        design_sha = None
    up_next = NEXT[state]
    runs = _design_runs(ledger, part) if state in ("candidate", "testing", "passed") else []
    confirmed = [r for r in runs if r.get("decision") == "confirmed"]
    if confirmed:
        up_next = f"adopt: registered run {confirmed[0]['run_id']} is confirmed (frank campaign adopt {part.name})"
    elif any(r.get("decision") == "incomplete" for r in runs):
        up_next = f"testing: registered run {next(r for r in runs if r.get('decision') == 'incomplete')['run_id']} is not finished"  # noqa: E501
    if state == "adopted" and not part.knobs:
        up_next = f"in place: the part is the profile {part.profile} itself (no knob values to serve)"
    missing = [a for a in awaiting if not a.there]
    running = any(r.get("decision") == "incomplete" for r in runs)
    arrived = [e for e in evidence if e.get("awaited")]
    if missing and not confirmed and not running and state in ("candidate", "testing"):
        up_next = "awaits its evidence, not decided: " + "; ".join(f"{a.file}, made by {a.made_by}" for a in missing)
    elif arrived and not confirmed and not running and state in ("candidate", "testing"):
        up_next = (
            f"its awaited evidence is here ({', '.join(str(e.get('results')) for e in arrived)}): the rule decides "
            f"{arrived[-1].get('decision')}; record it as the part's evidence ([[parts.evidence]] with results = "
            f"the file and the state it justifies) in a new campaign file"
        )
    if fired:
        up_next = f"revert: rule {fired[-1]['fired'][0]} fired on {fired[-1]['run_kind']} {fired[-1]['run_id']}"
    return PartStatus(
        name=part.name,
        title=part.title,
        state=state,
        declared_state=part.state,
        served_defaults=served_defaults(part) if state == "served" else None,
        profile=part.profile,
        knobs=part.knob_dict,
        design=part.design,
        design_sha256=design_sha,
        evidence=tuple(evidence),
        evidence_ok=all(e.get("ok") for e in evidence),
        runs=tuple(runs),
        revert_rules=rule_status(ledger, part, pending),
        fired=tuple(FiredCheck(c["run_kind"], c["run_id"], tuple(c["fired"]), c["at"]) for c in fired),
        up_next=up_next,
        next=part.next,
        notes=part.notes,
        recorded=recorded,
        awaiting=tuple(awaiting),
    )


def awaited(ledger: Ledger, part: Part) -> list[AwaitStatus]:
    """The files the part awaits, each resolved and whether it is there yet."""
    out = []
    for a in part.awaits:
        path = ledger.campaign.resolve(a.file)
        out.append(AwaitStatus(a.file, str(path), path.is_file(), a.made_by, a.what))
    return out


def _design_runs(ledger: Ledger, part: Part) -> list[dict[str, Any]]:
    """The registered runs of the part's design (what `adopt` would look at), each decided."""
    if not part.design:
        return []
    try:
        return confirmed_runs(ledger.campaign, part)[1]
    except CampaignError:
        return []


def part_of_design(design_path: Path | str, path: Path | str | None = None) -> str:
    """The campaign's part (parts, comma-separated) whose design is this one (the same canonical hash): what
    a run registered of it records, so a host running its cells labels its figures with the part. "" when
    there is no campaign, no such part, or either file cannot be read (registering refuses a bad design
    itself; the campaign's own errors are `frank campaign status`'s to name)."""
    from frank.errors import FrankError
    from frank.experiments.design import load_design

    target = resolve_path(path)
    if not target.is_file():
        return ""
    try:
        campaign, sha = load_campaign(target), load_design(Path(design_path)).sha256
    except FrankError:
        return ""
    names = []
    for part in campaign.parts:
        try:
            if part.design and part_design(campaign, part)[0].sha256 == sha:
                names.append(part.name)
        except FrankError:
            continue
    return ",".join(names)


def served_defaults(part: Part) -> ServedDefaults:
    """Whether the profile, as it loads now, starts with the part's knob values (what serving means)."""
    from frank.engine.profiles import ProfileError, load_profile

    try:
        defaults = load_profile(part.profile).default_knobs()
    except ProfileError as exc:
        return ServedDefaults(False, str(exc))
    differ = {k: defaults.get(k) for k, v in part.knobs if defaults.get(k) != v}
    if differ:
        served = {k: v for k, v in part.knobs if k in differ}
        return ServedDefaults(False, f"profile {part.profile} starts with {differ}, not the served {served}")
    return ServedDefaults(True, f"profile {part.profile} starts with {part.knob_dict or 'itself'}")


def status(path: Path | str | None = None) -> CampaignStatus:
    """The campaign as it stands; a read: nothing is written (checks not yet recorded show as
    `pending_checks`, and their fired rules as alerts; `frank campaign watch` records them)."""
    ledger = open_ledger(resolve_path(path))
    pending = watch.pending(ledger)
    recorded = ledger.recorded_hashes()
    parts = tuple(part_status(ledger, part, pending, part.name in recorded) for part in ledger.campaign.parts)
    served = {p.name: ledger.since(ledger.campaign.part(p.name), "served") or 0 for p in parts if p.state == "served"}
    fired = [
        c
        for c in [*ledger.history, *pending]
        if c.get("event", "check") == "check"
        and c.get("fired")
        and c["part"] in served
        and c["at"] >= served[c["part"]]
    ]
    return CampaignStatus(
        file=str(ledger.campaign.path),
        history=str(ledger.history_file),
        name=ledger.campaign.name,
        description=ledger.campaign.description,
        version=ledger.campaign.version,
        parts=parts,
        pending_checks=tuple(pending),
        alerts=tuple(watch.alert_lines(fired)),
    )


# -- state changes ---------------------------------------------------------------------------------------------


def _writable(path: Path | str | None) -> Ledger:
    return record_new_parts(open_ledger(resolve_path(path)))


def adopt(name: str, path: Path | str | None = None, run_id: str | None = None) -> Adopted:
    ledger = _writable(path)
    part = ledger.campaign.part(name)
    state = ledger.state(part)
    if state not in ("candidate", "testing", "passed"):
        raise CampaignError(f"part {name} is {state}: only a candidate, testing or passed part can be adopted")
    design, runs = confirmed_runs(ledger.campaign, part)
    if run_id:
        runs = [r for r in runs if r["run_id"] == run_id or r["run_id"].startswith(run_id)]
        if not runs:
            raise CampaignError(
                f"part {name}: {run_id!r} is not a registered run of its design {part.design} "
                f"(sha256 {design.sha256[:12]}…); runs of other designs do not count"
            )
    confirmed = [r for r in runs if r.get("decision") == "confirmed"]
    if not confirmed:
        seen = "; ".join(f"{r['run_id']}: {r.get('decision')}" for r in runs) or "none registered"
        raise CampaignError(
            f"part {name} cannot be adopted: no confirmed registered run of its design {part.design} "
            f"(sha256 {design.sha256[:12]}…). Runs of that design: {seen}. Published results decided with "
            f"`frank experiment analyze` are evidence for the file, not a registered run: register the design "
            f"(frank experiment register), run it, and adopt when it is confirmed"
        )
    run = confirmed[0]
    event = append_event(
        ledger.history_file,
        "adopt",
        part=name,
        **{"from": state},
        run_id=run["run_id"],
        design_sha256=design.sha256,
        decision=run["decision"],
        p=run.get("p"),
        p_fraction=run.get("p_fraction"),
        reason=run.get("reason"),
    )
    return Adopted(name, state, run["run_id"], design.sha256, run["decision"], run.get("p_fraction"), event["at"])


def serve(name: str, path: Path | str | None = None, policy: str | None = None) -> Served:
    ledger = _writable(path)
    part = ledger.campaign.part(name)
    state = ledger.state(part)
    if state == "passed" and not policy:
        raise CampaignError(
            f"part {name} is passed, not adopted: adopt it first, or serve it on a policy call "
            f'with --policy "why" (recorded as such)'
        )
    if state not in ("adopted", "passed"):
        raise CampaignError(
            f"part {name} is {state}: only an adopted part (or a passed one on a policy call) can be served"
        )
    if not part.knobs:
        raise CampaignError(f"part {name} sets no knob values: there are no defaults to serve")
    override, previous = serving.set_defaults(
        part.profile, part.knob_dict, action="serve", part=name, campaign=str(ledger.campaign.path)
    )
    effect = serving.takes_effect(part.profile, part.knob_dict)
    event = append_event(
        ledger.history_file,
        "serve",
        part=name,
        **{"from": state},
        profile=part.profile,
        knobs=part.knob_dict,
        previous_defaults=previous,
        override=str(override),
        policy=policy,
        takes_effect=effect.to_json(),
    )
    return Served(name, state, part.profile, part.knob_dict, previous, str(override), policy, effect, event["at"])


def revert(name: str, path: Path | str | None = None, reason: str | None = None) -> Reverted:
    ledger = _writable(path)
    part = ledger.campaign.part(name)
    state = ledger.state(part)
    if state not in ("served", "adopted"):
        raise CampaignError(f"part {name} is {state}: only a served or adopted part can be reverted")
    if state == "served" and watch.sweep(ledger):  # record the checks this decision rests on
        ledger = open_ledger(ledger.campaign.path)
    fired = watch.fired_since_served(ledger, part) if state == "served" else []
    if not fired and not reason:
        raise CampaignError(
            f"part {name}: no revert rule has fired since it was served; revert it anyway with "
            f'--reason "why" (recorded)'
        )
    restored, override = None, None
    replaced = ledger.replaced_defaults(name)
    if state == "served" and replaced:
        override_path, _ = serving.set_defaults(
            part.profile, replaced, action="revert", part=name, campaign=str(ledger.campaign.path)
        )
        restored, override = replaced, str(override_path)
    rule = (
        {"run_kind": fired[-1]["run_kind"], "run_id": fired[-1]["run_id"], "rules": fired[-1]["fired"]}
        if fired
        else None
    )
    event = append_event(
        ledger.history_file,
        "revert",
        part=name,
        **{"from": state},
        reason=reason,
        rule=rule,
        restored_defaults=restored,
        override=override,
    )
    effect = serving.takes_effect(part.profile, restored) if restored else None
    return Reverted(name, state, reason, rule, restored, override, effect, event["at"])


def history(path: Path | str | None = None) -> CampaignHistory:
    ledger = open_ledger(resolve_path(path))
    return CampaignHistory(str(ledger.campaign.path), str(ledger.history_file), tuple(ledger.history))
