"""The guards and the revert rule of a design, judged over a run's starts (a `Guard` and a `Revert` each,
frank.experiments.decision's): failed requests, identical prompt token IDs and outputs across starts,
the episodes' checks; the revert rule's triggers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frank.experiments.decision import Guard, Revert
from frank.experiments.design import Design
from frank.experiments.observations import ALL_PROMPTS, Observation

if TYPE_CHECKING:
    from frank.experiments.fidelity import FidelityResult


def judge_guards(design: Design, obs: list[Observation], checks: list[Observation], source: str) -> list[Guard]:
    """The design's guards over the starts: pass, fail, or unchecked with why."""
    g = design.guards
    out = []
    if g.no_failed_requests:
        counts = [o.failed_requests for o in obs]
        if not obs or any(c is None for c in counts):
            elsewhere = ": measures taken elsewhere" if source == "external" else ""
            out.append(Guard("no_failed_requests", "unchecked", "no per-request records" + elsewhere))
        else:
            total = sum(c or 0 for c in counts)
            starts = len({o.start for o in obs}) if all(o.start for o in obs) else len(obs)
            out.append(
                Guard(
                    "no_failed_requests",
                    "pass" if total == 0 else "fail",
                    f"{total} failed requests over {starts} starts"
                    + "".join(f"; start {o.start}: {msg}" for o in obs for msg in o.failures),
                )
            )
    if g.prompt_token_ids_identical:
        out.append(_identical_prompts(obs, source))
    if g.outputs_identical:
        out.append(_identical_outputs(obs, source))
    for name in g.checks:
        rows = [c for c in checks if c.measure == f"check:{name}"]
        if not rows:
            out.append(Guard(name, "unchecked", "no outcome recorded"))
        else:
            bad = [c for c in rows if c.value != 1]
            out.append(Guard(name, "pass" if not bad else "fail", f"{len(rows) - len(bad)} of {len(rows)} passed"))
    return out


def _identical_prompts(obs: list[Observation], source: str) -> Guard:
    return _identical_hashes("prompt_token_ids_identical", "prompt token IDs", [o.prompt_hashes for o in obs], source)


def _identical_outputs(obs: list[Observation], source: str) -> Guard:
    return _identical_hashes("outputs_identical", "outputs", [o.output_hashes for o in obs], source)


def _identical_hashes(name: str, what: str, per_start: list[dict[str, str | None] | None], source: str) -> Guard:
    """Every request's hash the same in every start (a request's hash: its prompt IDs, or its outputs)."""
    if not per_start or any(h is None for h in per_start):
        return Guard(
            name, "unchecked", f"no {what} hashes" + (": measures taken elsewhere" if source == "external" else "")
        )
    keys = set().union(*(h or {} for h in per_start))
    missing = sum(1 for h in per_start for k in keys if not (h or {}).get(k))
    if missing:
        return Guard(name, "unchecked", f"the engine gave no {what} for {missing} request(s)")
    differ = [k for k in sorted(keys) if len({(h or {})[k] for h in per_start}) > 1]
    if differ:
        return Guard(
            name,
            "fail",
            f"{len(differ)} of {len(keys)} requests had different {what} across starts (first: {differ[0]})",
        )
    counted = "the digest of every request's" if keys == {ALL_PROMPTS} else f"{len(keys)} requests'"
    return Guard(name, "pass", f"{counted} {what} identical in all {len(per_start)} starts")


def judge_revert(
    design: Design,
    obs: list[Observation],
    mean_effect_pct: float | None,
    fidelity: FidelityResult | None,
    failed_attempts: dict[str, int] | None,
    source: str,
) -> Revert | None:
    """The design's revert rule over the run: its triggers, and what could not be checked."""
    rv = design.revert
    if rv is None:
        return None
    rule = design.rule
    triggers, unchecked = [], []
    if rv.treatment_only_failures:
        per_arm: dict[str, int | None] = {}
        for arm in (rule.treatment, rule.control):
            counts = [o.failed_requests for o in obs if o.arm == arm]
            if failed_attempts is None or any(c is None for c in counts):
                per_arm[arm] = None
            else:
                per_arm[arm] = sum(c or 0 for c in counts) + failed_attempts.get(arm, 0)
        if None in per_arm.values():
            unchecked.append(
                "treatment_only_failures: no failure records"
                + (", measures taken elsewhere" if source == "external" else "")
            )
        elif per_arm[rule.treatment] and not per_arm[rule.control]:
            triggers.append(f"{per_arm[rule.treatment]} failure(s) only in {rule.treatment}")
    if rv.max_worse_pct is not None:
        eff = mean_effect_pct
        if eff is None:
            unchecked.append("max_worse_pct: no effect measured")
        else:
            worse = eff if rule.direction == "lower" else -eff
            if worse > rv.max_worse_pct:
                triggers.append(f"mean effect {eff:+.2f}% is worse than the {rv.max_worse_pct:g}% limit")
    if rv.fidelity_regression:
        if fidelity is not None and fidelity["status"] == "fail":
            triggers.append(f"fidelity regression: {fidelity['detail']}")
        elif fidelity is None or fidelity["status"] != "pass":
            why = fidelity["detail"] if fidelity is not None else ""
            unchecked.append("fidelity_regression: " + (why or "no fidelity measured"))
    outcome = "revert" if triggers else ("unchecked" if unchecked else "keep")
    return Revert(outcome, rv.description, tuple(triggers), tuple(unchecked))
