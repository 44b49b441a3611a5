"""Experiment design files (TOML): parsing, validation that names the wrong field, canonical form and hash.

A design says what is compared (two arms: knob values or another profile), how the engine starts are
ordered (`blocks`: k blocks of one start per arm in random order; `balanced`: n starts per arm in one of
C(2n, n) orders; `external`: measured elsewhere, usable with `frank experiment analyze` only), what each
start replays, the measure, the decision rule, the guards, what a failed start does, and an optional revert
rule. docs/experiments.md is the reference; frank/experiments/designs/ has examples.

The canonical form is the parsed design with every default filled in, as JSON with sorted keys; its
SHA-256 is the design's identity (what registration prints and `run` checks).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from frank import tomlfile
from frank.experiments.design_schema import (
    ARM_NAME,
    TESTS,
    DesignSchema,
    FailureSchema,
    GuardsSchema,
    KindSchema,
    RevertSchema,
    RuleSchema,
    WorkloadSchema,
)
from frank.experiments.fidelity import (
    FidelityCanonical,
    FidelityRule,
    check_control_starts,
    check_sets,
    fidelity_rule,
)
from frank.experiments.tables import DesignError, Refusals

if TYPE_CHECKING:
    from frank.engine.profiles import KnobValue

# Measures the runner takes from the replay runner's per-request records, aggregated per engine start.
MEASURES = {
    "time_per_verify_step": "seconds of decode per verify step: sum of decode time / sum of decode steps "
    "(every target-model pass after the first token, drafted or not)",
    "front_end_per_draw": "seconds outside queueing and prefill (TTFT - queue - prefill), summed per draw, "
    "mean over the start's draws",
    "total_replay_time": "seconds of client time (send to last byte) summed over the start's requests",
    "client_time_per_draw": "seconds of client time (send to last byte) summed per draw, mean over the start's draws",
    "tokens_per_s": "output tokens per second of client time over the start's requests",
    "cpu_expert_wait_per_step": "seconds per verify step a llama.cpp engine's CPU pool computed (CPU-resident "
    "experts): the start's summed CPU-expert decode wait / the decode steps of the requests that carry one",
}
# Measures whose start value can be the median of its steps' times ([measure].aggregate = "median"), and the
# StartMeasures name that holds it
MEDIANS = {"time_per_verify_step": "time_per_verify_step_median"}
# What an engine kind must give for a measure to be taken (frank.engine.kinds' EngineKind.lacks)
MEASURE_NEEDS = {"front_end_per_draw": "front_end_s"}
# Measures of an engine start that runs graded agent episodes ([episodes] instead of [workload]).
EPISODE_MEASURES = {
    "episode_total_time": "client seconds summed over the start's episodes (every draw of the suite)",
    "episodes_passed": "episodes the suite's graders passed, over the start's draws",
}


@dataclass(frozen=True)
class Arm:
    name: str
    profile: str  # the design's profile unless the arm names another
    knobs: tuple[tuple[str, Any], ...]
    description: str = ""

    @property
    def knob_dict(self) -> dict[str, KnobValue]:
        return dict(self.knobs)


@dataclass(frozen=True)
class Workload:
    name: str  # a workload name (workloads dir) or a path to a workload folder
    draws: tuple[Any, ...]  # empty: every draw of the workload
    mode: str  # "engine" (max_tokens 1) or "full" (recorded params)
    requests: int | None  # replay only the first N requests of each draw
    warmup_requests: int  # the first N requests of each draw are replayed but not measured
    max_tokens: int | None = None  # full mode: cap the recorded max_tokens
    output_tokens: int = 1  # engine mode: output tokens per request (more than 1: greedy, outputs compared)


@dataclass(frozen=True)
class Episodes:
    suite: str  # a suite manifest (relative to the design file) or a built-in (w01-mini)
    draws: int  # draws per engine start; one draw runs every task of the suite once


@dataclass(frozen=True)
class Criterion:
    measure: str
    aggregate: str
    compare: str
    margin: float


@dataclass(frozen=True)
class Rule:
    test: str  # sign | permutation | criteria
    treatment: str
    control: str
    direction: str  # the treatment's measure is expected to be lower/higher
    alpha: float | None
    require_all: bool  # sign test: confirmed only if the treatment wins in every block
    criteria: tuple[Criterion, ...]


@dataclass(frozen=True)
class Guards:
    prompt_token_ids_identical: bool
    no_failed_requests: bool
    checks: tuple[str, ...]  # named checks whose outcome comes with the measures (analyze)
    outputs_identical: bool = False  # generated text and token IDs equal across starts (greedy engine mode)


@dataclass(frozen=True)
class Failure:
    action: str  # retry the same slot, or void the whole block
    max_retries: int


@dataclass(frozen=True)
class Revert:
    description: str
    treatment_only_failures: bool  # revert if a failure shows in treatment starts only
    max_worse_pct: float | None  # revert if the mean effect is worse than this, in percent
    fidelity_regression: bool = False  # revert if the fidelity rule fails (needs a [fidelity] table)


@dataclass(frozen=True)
class Design:
    name: str
    question: str
    description: str
    profile: str
    arms: tuple[Arm, Arm]
    kind: str
    blocks: int | None
    starts_per_arm: int | None
    run_order: tuple[str, ...]  # external designs: the order the measures were taken in, if known
    workload: Workload | None
    measure: str
    rule: Rule
    guards: Guards
    failure: Failure
    revert: Revert | None
    canonical: str
    sha256: str
    fidelity: FidelityRule | None = None  # [fidelity]: no worse than the control by more than the floor
    episodes: Episodes | None = None  # [episodes]: each start runs graded agent episodes, not a replay
    # [design] stop_when_decided: the runner stops once no remaining start can change the decision
    # (frank.experiments.stopping); written before the run like the rest of the rule
    stop_when_decided: bool = False
    hosts: tuple[str, ...] = ()  # [design].hosts: blocks dealt to these fleet hosts (frank.experiments.placement)
    # [measure].aggregate: "mean" (the start's decode seconds / its decode steps) or "median" (of its steps)
    measure_aggregate: str = "mean"

    @property
    def runnable(self) -> bool:
        return self.kind != "external"

    def arm(self, name: str) -> Arm:
        for arm in self.arms:
            if arm.name == name:
                return arm
        raise KeyError(name)

    @property
    def starts(self) -> int:
        if self.kind == "blocks":
            return 2 * (self.blocks or 0)
        if self.kind == "balanced":
            return 2 * (self.starts_per_arm or 0)
        return len(self.run_order)


# -- reading ----------------------------------------------------------------------------------------


def read_source(path: Path | str) -> str:
    """A design's (or a screen's) text, or the error naming the file."""
    return tomlfile.read_text(path, DesignError)


def load_design(path: Path | str, *, check_profiles: bool = False) -> Design:
    return parse_design_text(read_source(path), str(path), check_profiles=check_profiles)


def read_checked(text: str, where: str) -> tuple[dict[str, Any], tomlfile.KeyLines]:
    """The file's TOML data and the lines of its keys, or every value no field of frank takes refused."""
    data = tomlfile.parse(text, where, DesignError)
    lines = tomlfile.KeyLines(text)
    refusals = Refusals(where, lines)
    refusals.problems += tomlfile.plain_problems(data, where, lines)
    refusals.check()
    return data, lines


def parse_design_text(text: str, where: str = "<design>", *, check_profiles: bool = False) -> Design:
    data, lines = read_checked(text, where)
    design = parse_design(data, where, lines)
    if check_profiles:
        check_arm_profiles(design, where, lines)
    return design


def parse_design(data: dict[str, Any], where: str = "<design>", lines: tomlfile.KeyLines | None = None) -> Design:
    """The design of checked TOML data: the schema's refusals, then what ties fields together, all at once."""
    refusals = Refusals(where, lines)
    table = refusals.validate(DesignSchema, data)
    refusals.check()
    assert table is not None  # check() refused every other outcome
    design = _design(table, refusals)
    refusals.check()
    canonical = canonical_json(design)
    return replace(design, canonical=canonical, sha256=hashlib.sha256(canonical.encode()).hexdigest())


def _design(top: DesignSchema, refusals: Refusals) -> Design:
    add = refusals.add
    kinds = top.design
    kind = kinds.kind
    arms = _arms(top, refusals)
    names = tuple(arm.name for arm in arms)
    if kind == "external":
        for i, arm_name in enumerate(kinds.order):
            if arm_name not in names:
                add(("design", "order", i), f"{arm_name!r} is not an arm ({', '.join(names)})")
    for key, needed in (("blocks", "blocks"), ("starts_per_arm", "balanced")):
        if kind == needed and getattr(kinds, key) is None:
            add(f"design.{key}", "missing required field")
        if key in kinds.model_fields_set and kind != needed:
            add(f"design.{key}", f"only a {needed!r} design has {key} (this one is {kind!r})")
    hosts = _hosts(kinds, refusals)
    if "order" in kinds.model_fields_set and kind != "external":
        add("design.order", "only an 'external' design states its order; others draw it at registration")

    if top.workload is not None and top.episodes is not None:
        add("episodes", "a start either replays a [workload] or runs [episodes], not both")
        refusals.check()  # the measures and the rule a design may have follow from which one it is
    elif top.workload is None and top.episodes is None and kind != "external":
        add("workload", "missing required field (what each engine start replays; or [episodes])")
    workload = _workload(top.workload, refusals) if top.workload is not None else None
    episodes = None
    if top.episodes is not None and workload is None:
        episodes = Episodes(suite=top.episodes.suite, draws=top.episodes.draws)
    known = EPISODE_MEASURES if episodes is not None else MEASURES

    measure = top.measure.name if top.measure is not None else ""
    if top.measure is None and kind != "external":
        add("measure", "missing required field")
    elif kind != "external" and measure not in known:
        add("measure.name", f"{measure!r} is not one of: {', '.join(known)}")
    aggregate = top.measure.aggregate if top.measure is not None else "mean"
    if aggregate != "mean" and (measure not in MEDIANS or workload is None):
        add(
            "measure.aggregate",
            f"{aggregate!r} is taken over a replay's steps: only {', '.join(MEDIANS)} of a [workload] has it",
        )

    rule = _rule(top.rule, kind, names, refusals, live_criteria=episodes is not None)
    if kind != "external":
        for i, c in enumerate(rule.criteria):
            if c.measure not in known:
                add(
                    ("rule", "criteria", i, "measure"),
                    f"{c.measure!r} is not one of: {', '.join(known)} (fidelity has its own [fidelity] rule)",
                )
    guards = _guards(top.guards, refusals)
    failure = _failure(top.failure, kind, refusals)
    revert = _revert(top.revert, refusals) if top.revert is not None else None
    fidelity = fidelity_rule(top.fidelity, refusals) if top.fidelity is not None else None
    if fidelity is not None:
        control_starts = kinds.blocks if kind == "blocks" else kinds.starts_per_arm if kind == "balanced" else None
        check_control_starts(fidelity, rule.control, control_starts, refusals)
    if kinds.stop_when_decided and (kind == "external" or rule.test == "criteria"):
        add(
            "design.stop_when_decided",
            "only a runnable design decided by a sign or permutation test can stop when decided "
            f"(this one is {kind!r} with a {rule.test} rule)",
        )
    if revert is not None and revert.fidelity_regression and fidelity is None:
        add("revert.fidelity_regression", "needs a [fidelity] table (which sets, which floor)")
    if hosts and episodes is not None:
        add("design.hosts", "blocks over hosts replay a [workload]; [episodes] run on one host")
    return Design(
        name=top.name,
        question=top.question,
        description=top.description,
        profile=top.profile,
        arms=arms,
        kind=kind,
        blocks=kinds.blocks if kind == "blocks" else None,
        starts_per_arm=kinds.starts_per_arm if kind == "balanced" else None,
        run_order=tuple(kinds.order) if kind == "external" else (),
        workload=workload,
        measure=measure,
        rule=rule,
        guards=guards,
        failure=failure,
        revert=revert,
        canonical="",
        sha256="",
        fidelity=fidelity,
        episodes=episodes,
        stop_when_decided=kinds.stop_when_decided,
        hosts=hosts,
        measure_aggregate=aggregate,
    )


def _hosts(kinds: KindSchema, refusals: Refusals) -> tuple[str, ...]:
    """[design].hosts: the fleet hosts (frank.fleet.fleetfile) the blocks are dealt to, in drawn order."""
    hosts = kinds.hosts
    if hosts is None:
        return ()
    if kinds.kind != "blocks":
        refusals.add("design.hosts", f"only a 'blocks' design deals blocks to hosts (this one is {kinds.kind!r})")
    if not hosts:
        refusals.add("design.hosts", "must list at least one host of the fleet file")
    for i, name in enumerate(hosts):
        if not isinstance(name, str) or not ARM_NAME.match(name):
            refusals.add(("design", "hosts", i), f"expected a host name of the fleet file, got {name!r}")
        elif name in hosts[:i]:
            refusals.add(("design", "hosts", i), f"{name!r} is listed twice (one host, one share of the blocks)")
    return tuple(hosts)


def _arms(top: DesignSchema, refusals: Refusals) -> tuple[Arm, Arm]:
    if len(top.arms) != 2:
        refusals.add(
            "arms",
            f"a design compares exactly 2 arms, got {len(top.arms)} "
            "(an A/A design lists the same settings twice under two names)",
        )
        refusals.check()  # nothing else reads without two arms
    arms = []
    for i, arm in enumerate(top.arms):
        for knob, value in arm.knobs.items():
            if isinstance(value, (dict, list)):
                refusals.add(("arms", i, "knobs", knob), f"expected a single value, got {value!r}")
        profile = arm.profile if arm.profile is not None else top.profile
        arms.append(Arm(arm.name, profile, tuple(sorted(arm.knobs.items())), arm.description))
    if arms[0].name == arms[1].name:
        refusals.add("arms[1].name", f"{arms[1].name!r} is used twice")
    return arms[0], arms[1]


def _workload(table: WorkloadSchema, refusals: Refusals) -> Workload:
    for i, draw in enumerate(table.draws):
        if isinstance(draw, bool) or not isinstance(draw, (int, str)):
            refusals.add(("workload", "draws", i), f"expected a draw number or name, got {draw!r}")
    requests, warmup = table.requests, table.warmup_requests
    if requests is not None and warmup >= requests:
        refusals.add("workload.warmup_requests", f"{warmup} warm-up requests leave nothing to measure of {requests}")
    if table.max_tokens is not None and table.mode != "full":
        refusals.add("workload.max_tokens", 'only mode "full" sends recorded max_tokens (engine mode asks for 1)')
    if table.output_tokens != 1 and table.mode != "engine":
        refusals.add("workload.output_tokens", 'only mode "engine" asks for a set number of output tokens')
    return Workload(
        name=table.name,
        draws=tuple(table.draws),
        mode=table.mode,
        requests=requests,
        warmup_requests=warmup,
        max_tokens=table.max_tokens,
        output_tokens=table.output_tokens,
    )


def _rule(table: RuleSchema, kind: str, names: tuple[str, ...], refusals: Refusals, live_criteria: bool) -> Rule:
    add, test = refusals.add, table.test
    # a balanced design that runs episodes may decide by criteria (the seed's adoption rule) on live starts
    live = live_criteria and kind == "balanced" and test == "criteria"
    if TESTS[kind] != test and not live:
        add(
            "rule.test",
            f"a {kind!r} design uses the {TESTS[kind]!r} test, not {test!r}"
            + (" (criteria on live starts: a 'balanced' design with [episodes])" if test == "criteria" else ""),
        )
    for key, value in (("treatment", table.treatment), ("control", table.control)):
        if value not in names:
            add(f"rule.{key}", f"{value!r} is not an arm ({', '.join(names)})")
    if table.treatment == table.control:
        add("rule.control", "must name the other arm than treatment")
    alpha = table.alpha
    require_all = table.require_all if table.require_all is not None else test == "sign"
    if test == "permutation" and alpha is None:
        add("rule.alpha", "missing required field (a permutation test decides at alpha)")
    if test == "sign" and not require_all and alpha is None:
        add("rule.alpha", "a sign test needs require_all = true, an alpha, or both")
    criteria: list[Criterion] = []
    if test == "criteria":
        for key in ("alpha", "direction", "require_all"):
            if key in table.model_fields_set:
                add(f"rule.{key}", "a criteria rule states each criterion's comparison instead")
        if table.criteria is None:
            add("rule.criteria", "missing required field")
        elif not table.criteria:
            add("rule.criteria", "must list at least one criterion")
        criteria = [Criterion(c.measure, c.aggregate, c.compare, float(c.margin)) for c in table.criteria or ()]
    elif table.criteria is not None:
        add("rule.criteria", f"only a criteria rule has criteria (this is a {test} test)")
    return Rule(
        test=test,
        treatment=table.treatment,
        control=table.control,
        direction=table.direction or ("lower" if test != "criteria" else ""),
        alpha=alpha,
        require_all=require_all,
        criteria=tuple(criteria),
    )


def _guards(table: GuardsSchema, refusals: Refusals) -> Guards:
    for i, check in enumerate(table.checks):
        if not isinstance(check, str) or not check:
            refusals.add(("guards", "checks", i), f"expected a check name, got {check!r}")
    return Guards(
        prompt_token_ids_identical=table.prompt_token_ids_identical,
        no_failed_requests=table.no_failed_requests,
        checks=tuple(table.checks),
        outputs_identical=table.outputs_identical,
    )


def _failure(table: FailureSchema, kind: str, refusals: Refusals) -> Failure:
    if table.action == "void_block" and kind != "blocks":
        refusals.add("failure.action", f"only a 'blocks' design has blocks to void (this one is {kind!r})")
    if table.action == "void_block" and "max_retries" in table.model_fields_set:
        refusals.add("failure.max_retries", 'void_block does not retry; use action = "retry" to retry')
    return Failure(action=table.action, max_retries=table.max_retries if table.action == "retry" else 0)


def _revert(table: RevertSchema, refusals: Refusals) -> Revert:
    worse = table.max_worse_pct
    if not table.treatment_only_failures and worse is None and not table.fidelity_regression:
        refusals.add(
            "revert",
            "a revert rule needs treatment_only_failures = true, max_worse_pct, "
            "fidelity_regression = true, or a combination",
        )
    return Revert(
        description=table.description,
        treatment_only_failures=table.treatment_only_failures,
        max_worse_pct=float(worse) if worse is not None else None,
        fidelity_regression=table.fidelity_regression,
    )


def check_arm_profiles(design: Design, where: str, lines: tomlfile.KeyLines | None = None) -> None:
    """Each arm's profile exists, its knob values are allowed, and its engine kind can take the design's
    measure and guards (registration checks this; every error names the field)."""
    if not design.runnable:
        return
    from frank.engine.kinds import kind_of
    from frank.engine.profiles import ProfileError, load_profile

    refusals = Refusals(where, lines)
    if design.fidelity is not None:
        check_sets(design.fidelity, refusals)
    served: dict[str, str] = {}
    prints: dict[str, str | None] = {}
    for i, arm in enumerate(design.arms):
        field = "profile" if arm.profile == design.profile else f"arms[{i}].profile"
        try:
            profile = load_profile(arm.profile)
        except ProfileError as exc:
            refusals.add(field, f"{exc} (arm {arm.name!r})")
            continue
        kind = kind_of(profile)
        try:
            profile.resolve_knobs(arm.knob_dict)
        except ProfileError as exc:
            refusals.add(f"arms[{i}].knobs", f"{exc} (arm {arm.name!r} runs {profile.name}, a {kind.label} engine)")
        for asked, needs, named in _KIND_NEEDS:
            lacking = asked(design) and kind.lacks.get(needs)
            if lacking:
                refusals.add(named, f"arm {arm.name!r} runs {profile.name}, a {kind.label} engine: {lacking}")
        served[arm.name] = profile.model_path()
        prints[arm.name] = _model_fingerprint(profile)
    refusals.check()
    if design.fidelity is None:
        return
    (a, ma), (b, mb) = served.items()
    (_, pa), (_, pb) = prints.items()
    same = pa == pb if pa and pb else not (pa or pb) and ma == mb
    if not same:  # a served name is a label: the fingerprints (or, off this machine, the files) decide
        files = f"fingerprints {pb[:12]} and {pa[:12]}" if pa and pb else f"files {mb} and {ma}"
        refusals.add(
            "arms[1].profile",
            f"arm {b!r} and arm {a!r} serve different model files ({files}): the fidelity rule compares each "
            "arm's KL against one reference model, so both arms must serve the same model",
        )
    refusals.check()


def _model_fingerprint(profile: Any) -> str | None:
    """The fingerprint of the checkpoint a profile's fidelity reference is (frank.engine.model_facts), or None
    when it is not on this machine."""
    from frank.engine.model_facts import fingerprint
    from frank.errors import FrankError
    from frank.fidelity.runs import reference_source

    try:
        folder, _ = reference_source(profile)
    except (FrankError, OSError):
        return None
    return fingerprint(folder)


# What a design asks of every arm's engine: (asks it?, what the engine must give, the field that asks);
# frank.engine.kinds' EngineKind.lacks says what a kind cannot give.
_KIND_NEEDS: tuple[tuple[Callable[[Design], bool], str, str], ...] = (
    *(
        (lambda d, m=measure: d.workload is not None and d.measure == m, needs, "measure.name")
        for measure, needs in MEASURE_NEEDS.items()
    ),
    (lambda d: d.guards.prompt_token_ids_identical, "prompt_token_ids", "guards.prompt_token_ids_identical"),
)


# -- canonical form ---------------------------------------------------------------------------------


class DesignCanonical(TypedDict):
    """A design in its canonical form: what its sha256 is taken over (`canonical_json`), one key a table."""

    format: int
    name: str
    question: str
    description: str
    profile: str
    arms: list[dict[str, Any]]
    design: dict[str, Any]  # kind, blocks, starts_per_arm, order (hosts, stop_when_decided: only when set)
    workload: dict[str, Any] | None
    measure: str
    rule: dict[str, Any]
    guards: dict[str, Any]
    failure: dict[str, Any]
    revert: dict[str, Any] | None
    fidelity: NotRequired[FidelityCanonical]
    episodes: NotRequired[dict[str, Any]]
    measure_aggregate: NotRequired[str]


def canonical_dict(design: Design) -> DesignCanonical:
    rule = design.rule
    out: DesignCanonical = {
        "format": 1,
        "name": design.name,
        "question": design.question,
        "description": design.description,
        "profile": design.profile,
        "arms": [
            {"name": a.name, "profile": a.profile, "knobs": dict(a.knobs), "description": a.description}
            for a in design.arms
        ],
        "design": {
            "kind": design.kind,
            "blocks": design.blocks,
            "starts_per_arm": design.starts_per_arm,
            "order": list(design.run_order),
        },
        "workload": None
        if design.workload is None
        else {
            "name": design.workload.name,
            "draws": list(design.workload.draws),
            "mode": design.workload.mode,
            "requests": design.workload.requests,
            "warmup_requests": design.workload.warmup_requests,
            "max_tokens": design.workload.max_tokens,
            # only when set, so designs registered before these keys existed freeze to the same JSON
            **({"output_tokens": design.workload.output_tokens} if design.workload.output_tokens != 1 else {}),
        },
        "measure": design.measure,
        "rule": {
            "test": rule.test,
            "treatment": rule.treatment,
            "control": rule.control,
            "direction": rule.direction,
            "alpha": rule.alpha,
            "require_all": rule.require_all,
            "criteria": [
                {"measure": c.measure, "aggregate": c.aggregate, "compare": c.compare, "margin": c.margin}
                for c in rule.criteria
            ],
        },
        "guards": {
            "prompt_token_ids_identical": design.guards.prompt_token_ids_identical,
            "no_failed_requests": design.guards.no_failed_requests,
            "checks": list(design.guards.checks),
            **({"outputs_identical": True} if design.guards.outputs_identical else {}),
        },
        "failure": {"action": design.failure.action, "max_retries": design.failure.max_retries},
        "revert": None
        if design.revert is None
        else {
            "description": design.revert.description,
            "treatment_only_failures": design.revert.treatment_only_failures,
            "max_worse_pct": design.revert.max_worse_pct,
        },
    }
    # added fields appear only when used, so the hashes of designs registered before them do not change
    if design.fidelity is not None:
        out["fidelity"] = design.fidelity.canonical()
    if design.hosts:  # only when used: older designs keep their hashes
        out["design"]["hosts"] = list(design.hosts)
    if design.episodes is not None:  # only when used: older designs keep their hashes
        out["episodes"] = {"suite": design.episodes.suite, "draws": design.episodes.draws}
    if out["revert"] is not None and design.revert is not None and design.revert.fidelity_regression:
        out["revert"]["fidelity_regression"] = True
    if design.stop_when_decided:
        out["design"]["stop_when_decided"] = True
    if design.measure_aggregate != "mean":  # only when not the default: older designs keep their hashes
        out["measure_aggregate"] = design.measure_aggregate
    return out


def canonical_json(design: Design) -> str:
    return json.dumps(canonical_dict(design), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
