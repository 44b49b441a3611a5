"""The decision under a design's frozen rule, as a type: made here, read through its fields.

`decide` takes what the rule itself said (its verdict and why: frank.experiments.analysis's block,
balanced and criteria tests), the guards and the fidelity rule, and gives the one `Decision`: a
confirmation that a guard failed on is not one, and neither is one whose fidelity rule could not be
evaluated. The report (`analysis.ExperimentReport`) holds it; the text, the HTML page and the campaign
(evidence decided again, adopt, status) read it by its fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

Verdict = Literal["confirmed", "not confirmed", "incomplete"]


@dataclass(frozen=True)
class Guard:
    name: str
    status: str  # pass | fail | unchecked
    detail: str = ""


@dataclass(frozen=True)
class Revert:
    """The design's revert rule, evaluated: keep, revert (with its triggers) or unchecked."""

    outcome: str
    description: str = ""
    triggers: tuple[str, ...] = ()
    unchecked: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str
    design_sha256: str = ""
    p_value: float | None = None
    p_fraction: str | None = None
    mean_effect_pct: float | None = None
    guards: tuple[Guard, ...] = ()
    fidelity_status: str | None = None  # pass | fail | unchecked; None: the design has no fidelity rule
    revert: Revert | None = None

    @property
    def confirmed(self) -> bool:
        return self.verdict == "confirmed"

    @property
    def failed_guards(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.guards if g.status == "fail")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def decide(
    rule_verdict: Verdict,
    rule_reason: str,
    guards: Iterable[Guard],
    fidelity: Mapping[str, Any] | None,
    *,
    design_sha256: str = "",
    p_value: float | None = None,
    p_fraction: str | None = None,
    mean_effect_pct: float | None = None,
) -> Decision:
    """The decision: the rule's verdict under the guards and the fidelity rule (part of the decision, not a
    note beside it). The revert rule is evaluated apart (frank.experiments.guards) and added by the report."""
    guards = tuple(guards)
    failed = [g.name for g in guards if g.status == "fail"]
    verdict, reason = rule_verdict, rule_reason
    status = (fidelity or {}).get("status")
    if verdict == "confirmed" and failed:
        verdict, reason = "not confirmed", f"guard failed: {', '.join(failed)} ({reason})"
    elif verdict == "confirmed" and status == "pass":
        reason += " and the fidelity rule holds"
    elif status == "unchecked":
        why = f"the fidelity rule could not be evaluated ({(fidelity or {}).get('detail')})"
        if verdict == "confirmed":
            verdict, reason = "incomplete", f"{reason}, but {why}"
        elif verdict == "not confirmed":
            reason = f"{reason}; {why}"
    return Decision(
        verdict=verdict,
        reason=reason,
        design_sha256=design_sha256,
        p_value=p_value,
        p_fraction=p_fraction,
        mean_effect_pct=mean_effect_pct,
        guards=guards,
        fidelity_status=status,
    )
