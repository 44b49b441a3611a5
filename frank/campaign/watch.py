"""The revert watch: every run that finishes while a part is served, and involves it, is checked against
the part's revert rules; each check is an event in the history, fired or not.

A run involves a part when one of its arms ran the part's profile with the part's knob values. The control
is an arm of the same run without them (an experiment), or else the latest earlier run of the same kind and
comparable key without them (a replay of the same workload and options): the same profile without the
part's knob values, or, for a part that is a whole profile (no knob values), another profile. Rules:

- treatment_only_failures: the part's arm failed somewhere (requests, starts, episodes), the control did not
- pass_rate_drop:          the part's pass rate is below the control's by more than `max_drop`
- fidelity_regression:     the part's KL is above the control's by more than `floor`
- measure_worse:           `measure` is worse than the control's by more than `max_worse_pct` percent

`sweep` records the checks: `frank campaign watch`, the end of `frank replay` and `frank experiment run`,
and the console's watch call it. `pending` computes the same checks without writing, for what only reads
(`frank campaign status`, the campaign screen, a `--read-only` console): a fired rule shows at once
wherever the operator looks, and a read never appends to the history.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from frank.campaign.adapters import ADAPTERS, ArmResult, RunResult
from frank.campaign.ledger import Ledger, append_event, open_ledger
from frank.campaign.parts import HIGHER_IS_BETTER, Part, RevertRule
from frank.errors import FrankError


def runs_part(arm: ArmResult, part: Part) -> bool:
    return arm.profile == part.profile and all(arm.knobs.get(k) == v for k, v in part.knobs)


@dataclass(frozen=True)
class RuleCheck:
    """One revert rule checked on a run: its outcome and the numbers behind it (a check event's `rules`)."""

    name: str
    kind: str
    outcome: str  # fired | ok | unchecked
    detail: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def evaluate(rule: RevertRule, arm: ArmResult, control: ArmResult | None) -> RuleCheck:
    """One rule on the part's arm against the control: fired, ok or unchecked, with the numbers."""

    def unchecked(detail: str) -> RuleCheck:
        return RuleCheck(rule.name, rule.kind, "unchecked", detail)

    if control is None:
        return unchecked("no control: no arm or earlier comparable run without the part")
    if arm.knobs_changed or control.knobs_changed:
        return unchecked("a knob was flipped while a run was going")
    if rule.kind == "treatment_only_failures":
        if arm.failures is None or control.failures is None:
            return unchecked("no failure counts")
        fired = arm.failures > 0 and control.failures == 0
        detail = f"{arm.failures} failure(s) with the part, {control.failures} without"
    elif rule.kind == "pass_rate_drop":
        if not arm.total or not control.total or arm.passed is None or control.passed is None:
            return unchecked("no pass counts")
        a, c = arm.passed / arm.total, control.passed / control.total
        fired = a < c - rule.max_drop
        detail = (
            f"pass rate {arm.passed}/{arm.total} = {a:.3f} with the part, {control.passed}/{control.total} = "
            f"{c:.3f} without (allowed drop {rule.max_drop:g})"
        )
    elif rule.kind == "fidelity_regression":
        if arm.fidelity is None or control.fidelity is None:
            return unchecked("no fidelity measured in this run")
        fired = arm.fidelity > control.fidelity + rule.floor
        detail = f"KL {arm.fidelity:.4g} with the part, {control.fidelity:.4g} without (floor {rule.floor:g})"
    else:
        got, base = arm.measures.get(rule.measure), control.measures.get(rule.measure)
        if got is None or base is None or base == 0:
            return unchecked(f"{rule.measure} not measured on both sides")
        a, c = got, base
        worse = (a - c) / c * 100.0 * (-1.0 if rule.measure in HIGHER_IS_BETTER else 1.0)
        fired = worse > rule.max_worse_pct
        detail = (
            f"{rule.measure} {a:.6g} with the part, {c:.6g} without: {worse:+.2f}% worse "
            f"(limit {rule.max_worse_pct:g}%)"
        )
    return RuleCheck(rule.name, rule.kind, "fired" if fired else "ok", detail)


def is_control(arm: ArmResult, part: Part) -> bool:
    """An arm that can stand for "without the part": the part's profile without its knob values, or, for a
    part that is a profile of its own (no knob values), any other profile."""
    if runs_part(arm, part):
        return False
    return arm.profile == part.profile if part.knobs else arm.profile != part.profile


def _control(
    result: RunResult, part: Part, earlier: list[RunResult], treated: ArmResult
) -> tuple[ArmResult | None, str]:
    """An arm of the same run without the part, else the newest earlier comparable run's: the newest that
    differs from the treated arm only in the part's own knobs when there is one (with two parts served,
    a run with the other part alone says more about this part than a run with neither)."""
    for arm in result.arms:
        if is_control(arm, part):
            return arm, result.run_id
    found: list[tuple[ArmResult, str]] = []
    for other in earlier:  # newest first
        if other.comparable != result.comparable or other.finished_at >= result.finished_at:
            continue
        found += [(arm, other.run_id) for arm in other.arms if is_control(arm, part)]
    for arm, run_id in found:
        if not part.knobs or not other_differences(treated, arm, part):
            return arm, run_id
    return found[0] if found else (None, "")


def other_differences(arm: ArmResult, control: ArmResult, part: Part) -> dict[str, list[Any]]:
    """Knobs other than the part's own that differ between its arm and the control ({knob: [arm, control]}).
    When two parts are served together, the control of a run with both is a run with neither: a rule that
    fires then cannot tell which part caused it, and the check says so."""
    own = {k for k, _ in part.knobs}
    keys = sorted((set(arm.knobs) | set(control.knobs)) - own)
    return {k: [arm.knobs.get(k), control.knobs.get(k)] for k in keys if arm.knobs.get(k) != control.knobs.get(k)}


def check_run(part: Part, result: RunResult, earlier: list[RunResult]) -> dict[str, Any] | None:
    """The check of one run against one part, or None when the run does not involve the part."""
    arm = next((a for a in result.arms if runs_part(a, part)), None)
    if arm is None:
        return None
    control, control_run = _control(result, part, earlier, arm)
    rules = [evaluate(rule, arm, control) for rule in part.revert_rules]
    others = other_differences(arm, control, part) if control is not None and part.knobs else {}
    if others:
        said = ", ".join(f"{k} {a} here, {c} in the control" for k, (a, c) in others.items())
        also = f" (the control also differs in {said}: the cause may be another part)"
        rules = [r if r.outcome == "unchecked" else replace(r, detail=r.detail + also) for r in rules]
    return {
        "control_also_differs": others,
        "part": part.name,
        "run_kind": result.kind,
        "run_id": result.run_id,
        "run_label": result.label,
        "finished_at": result.finished_at,
        "arm": arm.name,
        "control": {"run_id": control_run, "arm": control.name} if control else None,
        "rules": [r.to_json() for r in rules],
        "fired": [r.name for r in rules if r.outcome == "fired"],
    }


def sweep(ledger: Ledger) -> list[dict[str, Any]]:
    """Check every finished run not checked yet against each served part it involves; return the new checks
    (each also appended to the history). One sweep at a time per campaign (a lock file next to the history),
    so the CLI and the console never record the same check twice."""
    lock = ledger.history_file.with_name(ledger.history_file.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        ledger = open_ledger(ledger.campaign.path)
        return [append_event(ledger.history_file, "check", **check) for check in pending(ledger)]
    finally:
        os.close(fd)


def pending(ledger: Ledger) -> list[dict[str, Any]]:
    """The checks a sweep would record now (finished runs not checked yet against the served parts they
    involve), computed without writing anything."""
    served = [(p, ledger.since(p, "served") or 0.0) for p in ledger.campaign.parts if ledger.state(p) == "served"]
    if not served:
        return []
    checked = {(e["part"], e["run_kind"], e["run_id"]) for e in ledger.history if e["event"] == "check"}
    new = []
    for kind, adapter in ADAPTERS.items():
        try:
            refs = sorted(adapter.finished(), key=lambda r: r.finished_at)
        except (OSError, FrankError):
            continue
        todo = [
            r
            for r in refs
            if any(r.finished_at >= since and (p.name, kind, r.run_id) not in checked for p, since in served)
        ]
        if not todo:
            continue
        loaded: dict[str, RunResult] = {}

        def load(run_id: str) -> RunResult | None:
            if run_id not in loaded:  # noqa: B023
                try:
                    loaded[run_id] = adapter.load(run_id)  # noqa: B023
                except (OSError, ValueError, KeyError, FrankError):
                    return None
            return loaded[run_id]  # noqa: B023

        for ref in todo:
            result = load(ref.run_id)
            if result is None:
                continue
            for part, since in served:
                if ref.finished_at < since or (part.name, kind, ref.run_id) in checked:
                    continue
                if not any(runs_part(a, part) for a in result.arms):
                    continue
                earlier = (
                    [
                        x
                        for x in (load(r.run_id) for r in reversed(refs) if r.finished_at < ref.finished_at)
                        if x is not None
                    ]
                    if result.arms and len(result.arms) == 1
                    else []
                )
                check = check_run(part, result, earlier)
                if check is not None:
                    new.append({**check, "at": time.time()})
                    checked.add((part.name, kind, ref.run_id))
    return new


def sweep_file(path: Any, record: bool = True) -> list[dict[str, Any]]:
    """Sweep the campaign at `path` (with `record=False`: only compute the pending checks), if there is one
    with a history; never raises for a missing campaign (called at the end of every replay and experiment
    run, and by the console's watch)."""
    try:
        ledger = open_ledger(path)
        return sweep(ledger) if record else pending(ledger)
    except FrankError:
        return []


def fired_since_served(ledger: Ledger, part: Part) -> list[dict[str, Any]]:
    since = ledger.since(part, "served") or 0.0
    return [e for e in ledger.events_for(part.name) if e["event"] == "check" and e.get("fired") and e["at"] >= since]


def alert_lines(checks: list[dict[str, Any]]) -> list[str]:
    out = []
    for c in checks:
        for r in c["rules"]:
            if r["outcome"] == "fired":
                out.append(
                    f"REVERT RULE FIRED: part {c['part']}, rule {r['name']} on {c['run_kind']} {c['run_id']}: "
                    f"{r['detail']} (frank campaign revert {c['part']})"
                )
    return out
