"""Analysis under the frozen rule: effect per block in %, exact p-value, decision, revert rule, guards.

One function, `analyze`, works on observations (start order, block, arm, value), whether they come from a
run's journal (frank.experiments.report.report_for_run) or from measures taken elsewhere
(frank.experiments.results_csv.read_results_csv, for `frank experiment analyze DESIGN.toml RESULTS.csv`).
It returns an `ExperimentReport`, which holds the `Decision`; its `to_json` is `report --json`. The effect of
a block is the treatment's value against the control's: (treatment - control) / control, in percent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from statistics import mean
from typing import Any

from frank.experiments import exact, stopping
from frank.experiments.decision import Decision, Guard, Verdict, decide
from frank.experiments.design import Criterion, Design
from frank.experiments.errors import ResultsError
from frank.experiments.fidelity import FidelityResult
from frank.experiments.guards import judge_guards, judge_revert
from frank.experiments.observations import Observation
from frank.experiments.stopping import Stop
from frank.experiments.tally import BlockTally, by_block, effect_pct, tally_blocks

_NOT_VALUES = ("check:", "fidelity:", "fidelity_floor:")  # rows that are a guard's outcome or a KL, not a value


@dataclass(frozen=True)
class Tested:
    """The p-value of the rule's exact test over what was measured."""

    p_value: float
    p_fraction: str  # k/N of the null's equally likely outcomes
    null_size: int  # the tested null's size (smaller than the design's when the run stopped early)


@dataclass(frozen=True)
class StartValue:
    """One start's value (balanced designs), or one measure of a start (criteria)."""

    start: int
    arm: str
    value: float
    measure: str | None = None  # criteria: which measure

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"start": self.start, "arm": self.arm}
        if self.measure is not None:
            out["measure"] = self.measure
        return out | {"value": self.value}


@dataclass(frozen=True)
class ArmComparison:
    """A balanced design's arms side by side (None: an arm has no value yet)."""

    arm_means: dict[str, float | None]
    mean_difference: float | None = None  # treatment minus control
    ratio_of_means: float | None = None  # control / treatment
    separated: bool | None = None  # every treatment value beats every control value in the rule's direction


@dataclass(frozen=True)
class CriterionResult:
    """One criterion of a criteria rule, evaluated over its measure's per-arm aggregate."""

    criterion: Criterion
    treatment: float | None
    control: float | None
    met: bool | None  # None: an arm has no value
    text: str

    @property
    def measure(self) -> str:
        return self.criterion.measure

    def to_json(self) -> dict[str, Any]:
        c = self.criterion
        return {"measure": c.measure, "aggregate": c.aggregate, "compare": c.compare, "margin": c.margin} | {
            "treatment": self.treatment,
            "control": self.control,
            "met": self.met,
            "text": self.text,
        }


@dataclass(frozen=True)
class CostNotSpent:
    """What stopping when decided saved: the engine starts not run and, at the mean wall time of the cells
    that ran, their seconds."""

    starts_run: int
    starts_not_run: int
    seconds_per_start: float | None
    seconds_spent: float
    seconds_not_spent: float | None


@dataclass(frozen=True)
class RunFacts:
    """What a registered run adds to its report: its id, its order, its attempts and measures per start."""

    run_id: str
    registered_at: str | None
    seed: int | None
    order_index: int | None
    order_count: int | None
    attempts: dict[str, list[dict[str, Any]]]  # start -> its attempts (attempt, status, error)
    measures: dict[str, dict[str, Any] | None]  # start -> every measure of the start
    arms: list[dict[str, str | None]]  # name, profile, kind of engine
    draws: list[dict[str, Any]]  # episodes: each start's draws


@dataclass(frozen=True)
class ExperimentReport:
    """A design's results under its frozen rule: what was measured, the tests, and the `Decision`."""

    name: str
    question: str
    kind: str
    source: str  # run | external
    design_sha256: str
    measure: str
    test: str
    treatment: str
    control: str
    direction: str | None
    alpha: float | None
    require_all: bool | None
    order: list[dict[str, Any]]  # the drawn order: start, block, arm
    null_size: int | None
    smallest_p: float | None
    decision: Decision  # verdict and reason, p, mean effect, guards, revert
    notes: tuple[str, ...] = ()
    tested: Tested | None = None
    blocks: BlockTally | None = None  # a blocks design's per-block table
    hosts: dict[int, str] | None = None  # block -> the host it ran on (a design over hosts)
    starts: tuple[StartValue, ...] | None = None  # balanced and criteria designs
    comparison: ArmComparison | None = None  # balanced designs
    criteria: tuple[CriterionResult, ...] | None = None
    stopped_when_decided: Stop | None = None
    cost_not_spent: CostNotSpent | None = None  # a registered run that stopped when decided
    fidelity: FidelityResult | None = None
    run: RunFacts | None = None
    results_csv: str = ""  # the results file `frank experiment analyze` read

    @property
    def verdict(self) -> str:
        return self.decision.verdict

    @property
    def p_value(self) -> float | None:
        return self.decision.p_value

    @property
    def p_fraction(self) -> str | None:
        return self.decision.p_fraction

    @property
    def mean_effect_pct(self) -> float | None:
        return self.decision.mean_effect_pct

    @property
    def guards(self) -> tuple[Guard, ...]:
        return self.decision.guards

    def block_rows(self) -> list[dict[str, Any]]:
        """The per-block table as `report --json` has it (with each block's host on a design over hosts)."""
        rows = []
        for b in self.blocks.blocks if self.blocks else ():
            row: dict[str, Any] = {
                "block": b.block,
                "values": b.values,
                "voided": b.voided,
                "effect_pct": b.effect_pct,
                "sign": b.sign,
            }
            if self.hosts is not None:
                row["host"] = self.hosts.get(b.block)
            rows.append(row)
        return rows

    def to_json(self) -> dict[str, Any]:
        d = self.decision
        out: dict[str, Any] = {
            "name": self.name,
            "question": self.question,
            "kind": self.kind,
            "source": self.source,
            "design_sha256": self.design_sha256,
            "measure": self.measure,
            "test": self.test,
            "treatment": self.treatment,
            "control": self.control,
            "direction": self.direction,
            "alpha": self.alpha,
            "require_all": self.require_all,
            "order": self.order,
            "null_size": self.null_size,
            "smallest_p": self.smallest_p,
            "p_value": d.p_value,
            "p_fraction": d.p_fraction,
            "notes": list(self.notes),
        }
        tested_null_size = self.tested.null_size if self.tested else None
        if self.blocks is not None:
            t = self.blocks
            out |= {
                "blocks": self.block_rows(),
                "wins": t.wins,
                "losses": t.losses,
                "ties": t.ties,
                "complete_blocks": t.complete,
                "voided_blocks": list(t.voided),
                "mean_effect_pct": d.mean_effect_pct,
                "tested_null_size": tested_null_size,
            }
        if self.comparison is not None:
            c = self.comparison
            out |= {"starts": [s.to_json() for s in self.starts or ()], "arm_means": c.arm_means}
            if c.mean_difference is not None:
                out |= {
                    "mean_difference": c.mean_difference,
                    "mean_effect_pct": d.mean_effect_pct,
                    "ratio_of_means": c.ratio_of_means,
                    "separated": c.separated,
                }
            if tested_null_size is not None:
                out["tested_null_size"] = tested_null_size
        if self.criteria is not None:
            out["criteria"] = [c.to_json() for c in self.criteria]
            out["starts"] = [s.to_json() for s in self.starts or ()]
        if self.stopped_when_decided is not None:
            out["stopped_when_decided"] = self.stopped_when_decided.to_json() | (
                asdict(self.cost_not_spent) if self.cost_not_spent else {}
            )
        if self.fidelity is not None:
            out["fidelity"] = self.fidelity
        out["guards"] = [asdict(g) for g in d.guards]
        out["decision"], out["decision_reason"] = d.verdict, d.reason
        rv = d.revert
        out["revert"] = (
            None
            if rv is None
            else {
                "description": rv.description,
                "outcome": rv.outcome,
                "triggers": list(rv.triggers),
                "unchecked": list(rv.unchecked),
            }
        )
        if self.run is not None:
            r = asdict(self.run)
            draws = r.pop("draws")
            out |= r | ({"draws": draws} if draws else {})
        if self.results_csv:
            out["results_csv"] = self.results_csv
        return out


@dataclass(frozen=True)
class _RuleOutcome:
    """What a rule's own test said, before the guards and the fidelity rule (`decide`)."""

    verdict: Verdict
    reason: str
    tested: Tested | None = None
    mean_effect_pct: float | None = None
    stop: Stop | None = None


def analyze(
    design: Design,
    observations: Iterable[Observation],
    *,
    source: str = "run",
    order: list[dict[str, Any]] | None = None,
    failed_attempts: dict[str, int] | None = None,
    voided: Iterable[int] = (),
) -> ExperimentReport:
    obs = sorted(observations, key=lambda o: o.start or 0)
    rule = design.rule
    checks = [o for o in obs if o.measure.startswith("check:")]
    fidelity_rows = [o for o in obs if o.measure.startswith(("fidelity:", "fidelity_floor:"))]
    obs = [o for o in obs if not o.measure.startswith(_NOT_VALUES)]
    notes: list[str] = []
    report = ExperimentReport(
        name=design.name,
        question=design.question,
        kind=design.kind,
        source=source,
        design_sha256=design.sha256,
        measure=design.measure,
        test=rule.test,
        treatment=rule.treatment,
        control=rule.control,
        direction=rule.direction or None,
        alpha=rule.alpha,
        require_all=rule.require_all if rule.test == "sign" else None,
        order=order
        if order is not None
        else [{"start": o.start, "block": o.block, "arm": o.arm} for o in obs if o.start],
        null_size=exact.null_size(design),
        smallest_p=exact.smallest_p(design),
        decision=Decision("incomplete", ""),  # decided below
    )
    if rule.test == "criteria":  # external, or live episode starts (the seed's adoption rule)
        criteria = _criteria(design, obs)
        report = replace(
            report,
            criteria=criteria,
            starts=tuple(StartValue(o.start, o.arm, o.value, o.measure) for o in obs),
        )
        notes.append("a decision rule, not a randomized comparison: no p-value")
        outcome = _criteria_outcome(criteria)
    elif design.kind == "blocks":
        tally = tally_blocks(design, by_block((o.block, o.arm, o.value) for o in obs), set(voided))
        report = replace(report, blocks=tally)
        outcome = _blocks(design, tally)
    else:
        comparison = _compare(design, obs)
        report = replace(report, starts=tuple(StartValue(o.start, o.arm, o.value) for o in obs), comparison=comparison)
        outcome = _balanced(design, obs)
    guards = judge_guards(design, obs, checks, source)
    fidelity = None
    if design.fidelity is not None:
        fidelity = _fidelity(design, obs, fidelity_rows)
        guards.append(Guard("fidelity", fidelity["status"], fidelity["detail"]))
    tested = outcome.tested
    decision = decide(
        outcome.verdict,
        outcome.reason,
        guards,
        fidelity,
        design_sha256=design.sha256,
        p_value=tested.p_value if tested else None,
        p_fraction=tested.p_fraction if tested else None,
        mean_effect_pct=outcome.mean_effect_pct,
    )
    unchecked = [g.name for g in guards if g.status == "unchecked"]
    if unchecked:
        notes.append(f"guards not checked here: {', '.join(unchecked)}")
    if source == "external" and design.kind != "external":
        notes.append("a randomization p-value only if the order was drawn uniformly before the starts")
    revert = judge_revert(design, obs, outcome.mean_effect_pct, fidelity, failed_attempts, source)
    return replace(
        report,
        decision=replace(decision, revert=revert),
        notes=tuple(notes),
        tested=tested,
        stopped_when_decided=outcome.stop,
        fidelity=fidelity,
    )


def _tested(res: exact.TestResult) -> Tested:
    return Tested(res.p_value, exact.fraction(res.p_value, res.null_size), res.null_size)


def _blocks(design: Design, tally: BlockTally) -> _RuleOutcome:
    rule = design.rule
    k = int(design.blocks or 0)
    w, missing = tally.wins, tally.missing
    tested = _tested(tally.test) if tally.test else None
    effect = tally.mean_effect_pct
    word = "lower" if rule.direction == "lower" else "higher"
    if missing > 0:
        stop = stopping.blocks_stop(design, tally)
        if stop is not None:  # the p is the finished blocks'
            return _RuleOutcome(stop.verdict, stop.summary(), tested, effect, stop)
        return _RuleOutcome("incomplete", f"{missing} of {k} blocks not measured yet", tested, effect)
    res = tally.test or exact.sign_test(0, 0)  # every block voided: nothing tested, p = 1
    reasons = []
    if rule.require_all and w < k:
        reasons.append(f"{rule.treatment} was {word} in {w} of {k} blocks, the rule needs all {k}")
    if rule.alpha is not None and res.p_value > rule.alpha:
        reasons.append(f"p = {exact.fraction(res.p_value, res.null_size)} > alpha {rule.alpha:g}")
    if reasons:
        return _RuleOutcome("not confirmed", "; ".join(reasons), tested, effect)
    return _RuleOutcome(
        "confirmed",
        f"{rule.treatment} {word} in {w} of {k} blocks; one-sided exact sign test "
        f"p = {exact.fraction(res.p_value, res.null_size)}",
        tested,
        effect,
    )


def _compare(design: Design, obs: list[Observation]) -> ArmComparison:
    rule = design.rule
    tvals = [o.value for o in obs if o.arm == rule.treatment]
    cvals = [o.value for o in obs if o.arm == rule.control]
    means = {rule.treatment: mean(tvals) if tvals else None, rule.control: mean(cvals) if cvals else None}
    if not (tvals and cvals):
        return ArmComparison(means)
    below = all(tv < cv for tv in tvals for cv in cvals)
    above = all(tv > cv for tv in tvals for cv in cvals)
    return ArmComparison(
        means,
        mean_difference=mean(tvals) - mean(cvals),
        ratio_of_means=mean(cvals) / mean(tvals) if mean(tvals) else None,
        separated=below if rule.direction == "lower" else above,
    )


def _balanced(design: Design, obs: list[Observation]) -> _RuleOutcome:
    rule = design.rule
    n = int(design.starts_per_arm or 0)
    tvals = [o.value for o in obs if o.arm == rule.treatment]
    cvals = [o.value for o in obs if o.arm == rule.control]
    effect = effect_pct(mean(tvals), mean(cvals)) if tvals and cvals else None
    if len(tvals) < n or len(cvals) < n:
        stop = stopping.balanced_stop(design, [(o.start or 0, o.arm, o.value) for o in obs])
        if stop is not None:  # the p is the finished starts'
            res = exact.permutation_test(tvals, cvals, rule.direction)
            return _RuleOutcome(stop.verdict, stop.summary(), _tested(res), effect, stop)
        return _RuleOutcome(
            "incomplete",
            f"{len(tvals)} of {n} {rule.treatment} and {len(cvals)} of {n} {rule.control} starts measured",
            mean_effect_pct=effect,
        )
    if len(tvals) != n or len(cvals) != n:
        raise ResultsError(f"the design has {n} starts per arm; the results have {len(tvals)} and {len(cvals)}")
    tested = _tested(exact.permutation_test(tvals, cvals, rule.direction))
    assert rule.alpha is not None
    if tested.p_value <= rule.alpha:
        return _RuleOutcome(
            "confirmed",
            f"one-sided exact permutation test p = {tested.p_fraction} <= alpha {rule.alpha:g}",
            tested,
            effect,
        )
    return _RuleOutcome(
        "not confirmed",
        f"one-sided exact permutation test p = {tested.p_fraction} > alpha {rule.alpha:g}",
        tested,
        effect,
    )


_COMPARE_TEXT = {
    "lower": "lower than",
    "higher": "higher than",
    "not_higher": "no higher than",
    "not_lower": "no lower than",
}


def _criteria(design: Design, obs: list[Observation]) -> tuple[CriterionResult, ...]:
    rule = design.rule
    out = []
    for c in rule.criteria:
        per_arm = {}
        for arm in (rule.treatment, rule.control):
            vals = [o.value for o in obs if o.measure == c.measure and o.arm == arm]
            per_arm[arm] = (sum(vals) if c.aggregate == "sum" else mean(vals)) if vals else None
        tv, cv = per_arm[rule.treatment], per_arm[rule.control]
        met = None
        if tv is not None and cv is not None:
            met = {
                "lower": tv < cv,
                "higher": tv > cv,
                "not_higher": tv <= cv + c.margin,
                "not_lower": tv >= cv - c.margin,
            }[c.compare]
        out.append(
            CriterionResult(
                criterion=c,
                treatment=tv,
                control=cv,
                met=met,
                text=f"{c.aggregate} of {c.measure}: {rule.treatment} {_COMPARE_TEXT[c.compare]} "
                f"{rule.control}"
                + (f" - {c.margin:g}" if c.compare == "not_lower" and c.margin else "")
                + (f" + {c.margin:g}" if c.compare == "not_higher" and c.margin else ""),
            )
        )
    return tuple(out)


def _criteria_outcome(criteria: tuple[CriterionResult, ...]) -> _RuleOutcome:
    missing = [c.measure for c in criteria if c.met is None]
    failed = [c.measure for c in criteria if c.met is False]
    if missing:
        return _RuleOutcome("incomplete", f"no values for: {', '.join(missing)}")
    if failed:
        return _RuleOutcome("not confirmed", f"criteria not met: {', '.join(failed)}")
    return _RuleOutcome("confirmed", f"all {len(criteria)} criteria met")


def _fidelity(design: Design, obs: list[Observation], rows: list[Observation]) -> FidelityResult:
    """The fidelity rule over the starts' measured KL (cells) or `fidelity:SET` rows (results CSV)."""
    from frank.experiments.fidelity import StartFidelity, evaluate

    assert design.fidelity is not None
    starts = [
        StartFidelity(o.start, o.arm, o.fidelity.get("sets", {}), o.fidelity.get("candidate"))
        for o in obs
        if o.fidelity
    ]
    by_start: dict[tuple[int, str], dict[str, dict[str, Any]]] = {}
    floors: dict[str, float] = {}
    for row in rows:
        kind, _, name = row.measure.partition(":")
        if kind == "fidelity_floor":
            floors[name] = max(floors.get(name, 0.0), row.value)
        else:
            by_start.setdefault((row.start, row.arm), {})[name] = {"kl": row.value}
    starts += [StartFidelity(start, arm, sets) for (start, arm), sets in by_start.items()]
    control = design.arm(design.rule.control)
    relative = None
    if design.fidelity.reference == "control":
        from frank.experiments.fidelity_control import against_control

        relative = against_control(design.fidelity, sorted(starts, key=lambda s: s.start), design.rule.control)
    result = evaluate(
        design.fidelity,
        starts,
        design.rule.treatment,
        design.rule.control,
        profile=control.profile,
        control_knobs=control.knob_dict,
        floors=floors or None,
        relative=relative,
    )
    unavailable = [
        {"start": o.start, "arm": o.arm, "reason": o.fidelity["unavailable"]}
        for o in obs
        if o.fidelity and o.fidelity.get("unavailable")
    ]
    if unavailable:
        result["unavailable"] = unavailable
        if result["status"] == "unchecked":
            result["detail"] = "no KL measured in " + "; ".join(
                f"start {u['start']} ({u['arm']}): {u['reason']}" for u in unavailable
            )
    return result
