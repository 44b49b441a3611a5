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
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from frank import tomlfile
from frank.experiments.fidelity import FidelityRule, check_control_starts, check_sets, parse_fidelity
from frank.experiments.tables import DesignError, Table

T = TypeVar("T")

KINDS = ("blocks", "balanced", "external")
TESTS = {"blocks": "sign", "balanced": "permutation", "external": "criteria"}
DIRECTIONS = ("lower", "higher")
FAILURE_ACTIONS = ("retry", "void_block")
MODES = ("engine", "full")
AGGREGATES = ("sum", "mean")
COMPARES = ("lower", "higher", "not_higher", "not_lower")
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
# What an engine kind must give for a measure to be taken (frank.engine.kinds' EngineKind.lacks)
MEASURE_NEEDS = {"front_end_per_draw": "front_end_s"}
# Measures of an engine start that runs graded agent episodes ([episodes] instead of [workload]).
EPISODE_MEASURES = {
    "episode_total_time": "client seconds summed over the start's episodes (every draw of the suite)",
    "episodes_passed": "episodes the suite's graders passed, over the start's draws",
}
ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# What the exact tests, the runner and `frank jobs list` carry (docs/experiments.md, "Bounds"): 100 blocks
# are 200 engine starts (a sign test's null of 2^100 outcomes); 10+10 balanced starts are C(20, 10) =
# 184,756 relabellings the permutation test enumerates (about 2 s here; 12+12 would take half a minute).
MAX_BLOCKS = 100
MAX_STARTS_PER_ARM = 10
MAX_EPISODE_DRAWS = 100  # draws of a suite per engine start
MAX_WORKLOAD_DRAWS = 1000  # draws listed in [workload].draws
MAX_REQUESTS = 1_000_000  # requests replayed per draw
MAX_TOKENS = 1 << 20  # [workload].max_tokens and output_tokens
MAX_RETRIES = 10


@dataclass(frozen=True)
class Arm:
    name: str
    profile: str  # the design's profile unless the arm names another
    knobs: tuple[tuple[str, Any], ...]
    description: str = ""

    @property
    def knob_dict(self) -> dict[str, Any]:
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
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise DesignError(f"{path}: cannot read: {exc.strerror}") from None


def load_design(path: Path | str, *, check_profiles: bool = False) -> Design:
    return parse_design_text(read_source(path), str(path), check_profiles=check_profiles)


def parse_checked(text: str, where: str, build: Callable[[dict[str, Any]], T]) -> T:
    """`build` over the file's plain TOML values; a refusal naming `FILE: FIELD` gets the field's line."""
    data = tomlfile.parse(text, where, DesignError)
    lines = tomlfile.KeyLines(text)
    try:
        tomlfile.check_plain(data, where, lines, DesignError)
        return build(data)
    except DesignError as exc:
        raise _at_line(exc, where, lines) from None


def parse_design_text(text: str, where: str = "<design>", *, check_profiles: bool = False) -> Design:
    def build(data: dict[str, Any]) -> Design:
        design = parse_design(data, where)
        if check_profiles:
            check_arm_profiles(design, where)
        return design

    return parse_checked(text, where, build)


def _at_line(exc: DesignError, where: str, lines: tomlfile.KeyLines) -> DesignError:
    """`FILE: FIELD: reason` with the line of FIELD added (`FILE:LINE: FIELD: reason`), when it is found."""
    text = str(exc)
    if not text.startswith(f"{where}: "):
        return exc
    field = text[len(where) + 2 :].split(": ", 1)[0]
    line = lines.line(field) if re.fullmatch(r'[A-Za-z0-9_.\[\]"-]+', field) else 0
    return DesignError(f"{where}:{line}: {text[len(where) + 2 :]}") if line else exc


TOP_FIELDS = (
    "name",
    "question",
    "description",
    "profile",
    "arms",
    "design",
    "workload",
    "measure",
    "rule",
    "guards",
    "failure",
    "revert",
    "fidelity",
    "episodes",
)


def parse_design(data: dict[str, Any], where: str = "<design>") -> Design:
    top = Table(data, "", where, TOP_FIELDS)
    name = top.get("name", str)
    if not name.strip():
        raise top.error("name", "must not be empty")
    question = top.get("question", str)
    description = top.get("description", str, "")
    profile = top.get("profile", str, "embedded-cpu")

    kind_table = Table(
        top.get("design", dict),
        "design",
        where,
        ("kind", "blocks", "starts_per_arm", "order", "stop_when_decided", "hosts"),
    )
    kind = kind_table.choice("kind", KINDS)
    arms = _parse_arms(top.get("arms", list, what="an array of [[arms]] tables"), where, profile)
    names = tuple(arm.name for arm in arms)

    blocks = starts_per_arm = None
    run_order: tuple[str, ...] = ()
    if kind == "blocks":
        blocks = kind_table.count("blocks", maximum=MAX_BLOCKS)
    elif kind == "balanced":
        starts_per_arm = kind_table.count("starts_per_arm", maximum=MAX_STARTS_PER_ARM)
    else:
        order = kind_table.get("order", list, [])
        if len(order) > 2 * MAX_BLOCKS:
            raise kind_table.error("order", f"{len(order)} starts; at most {2 * MAX_BLOCKS}")
        for i, arm_name in enumerate(order):
            if arm_name not in names:
                raise DesignError(f"{where}: design.order[{i}]: {arm_name!r} is not an arm ({', '.join(names)})")
        run_order = tuple(order)
    for key, needed in (("blocks", "blocks"), ("starts_per_arm", "balanced")):
        if key in kind_table.data and kind != needed:
            raise kind_table.error(key, f"only a {needed!r} design has {key} (this one is {kind!r})")
    hosts = _parse_hosts(kind_table, kind) if "hosts" in kind_table.data else ()
    if "order" in kind_table.data and kind != "external":
        raise kind_table.error("order", "only an 'external' design states its order; others draw it at registration")

    workload = episodes = None
    if "workload" in data and "episodes" in data:
        raise top.error("episodes", "a start either replays a [workload] or runs [episodes], not both")
    if "workload" in data:
        workload = _parse_workload(data["workload"], where)
    elif "episodes" in data:
        episodes = _parse_episodes(data["episodes"], where)
    elif kind != "external":
        raise top.error("workload", "missing required field (what each engine start replays; or [episodes])")
    known = EPISODE_MEASURES if episodes is not None else MEASURES

    measure = ""
    if "measure" in data:
        mtable = Table(data["measure"], "measure", where, ("name",))
        measure = mtable.get("name", str)
        if kind != "external" and measure not in known:
            raise mtable.error("name", f"{measure!r} is not one of: {', '.join(known)}")
    elif kind != "external":
        raise top.error("measure", "missing required field")

    rule = _parse_rule(top.get("rule", dict), where, kind, names, live_criteria=episodes is not None)
    if kind != "external":
        for i, c in enumerate(rule.criteria):
            if c.measure not in known:
                raise DesignError(
                    f"{where}: rule.criteria[{i}].measure: {c.measure!r} is not one of: "
                    f"{', '.join(known)} (fidelity has its own [fidelity] rule)"
                )
    guards = _parse_guards(data.get("guards", {}), where)
    failure = _parse_failure(data.get("failure", {}), where, kind)
    revert = _parse_revert(data["revert"], where) if "revert" in data else None
    fidelity = parse_fidelity(data["fidelity"], where) if "fidelity" in data else None
    if fidelity is not None:
        control_starts = blocks if kind == "blocks" else starts_per_arm if kind == "balanced" else None
        check_control_starts(fidelity, rule.control, control_starts, where)
    stop_when_decided = kind_table.get("stop_when_decided", bool, False)
    if stop_when_decided and (kind == "external" or rule.test == "criteria"):
        raise kind_table.error(
            "stop_when_decided",
            "only a runnable design decided by a sign or permutation test can stop when decided "
            f"(this one is {kind!r} with a {rule.test} rule)",
        )
    if revert is not None and revert.fidelity_regression and fidelity is None:
        raise DesignError(f"{where}: revert.fidelity_regression: needs a [fidelity] table (which sets, which floor)")

    design = Design(
        name=name,
        question=question,
        description=description,
        profile=profile,
        arms=arms,
        kind=kind,
        blocks=blocks,
        starts_per_arm=starts_per_arm,
        run_order=run_order,
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
        stop_when_decided=stop_when_decided,
        hosts=hosts,
    )
    if hosts and episodes is not None:
        raise kind_table.error("hosts", "blocks over hosts replay a [workload]; [episodes] run on one host")
    canonical = canonical_json(design)
    return replace(design, canonical=canonical, sha256=hashlib.sha256(canonical.encode()).hexdigest())


def _parse_hosts(table: Table, kind: str) -> tuple[str, ...]:
    """[design].hosts: the fleet hosts (frank.fleet.fleetfile) the blocks are dealt to, in drawn order."""
    if kind != "blocks":
        raise table.error("hosts", f"only a 'blocks' design deals blocks to hosts (this one is {kind!r})")
    hosts = table.get("hosts", list)
    if not hosts:
        raise table.error("hosts", "must list at least one host of the fleet file")
    for i, name in enumerate(hosts):
        if not isinstance(name, str) or not ARM_NAME.match(name):
            raise table.error(f"hosts[{i}]", f"expected a host name of the fleet file, got {name!r}")
        if name in hosts[:i]:
            raise table.error(f"hosts[{i}]", f"{name!r} is listed twice (one host, one share of the blocks)")
    return tuple(hosts)


def _parse_arms(raw: list[Any], where: str, profile: str) -> tuple[Arm, Arm]:
    if len(raw) != 2:
        raise DesignError(
            f"{where}: arms: a design compares exactly 2 arms, got {len(raw)} "
            f"(an A/A design lists the same settings twice under two names)"
        )
    arms = []
    for i, item in enumerate(raw):
        table = Table(item, f"arms[{i}]", where, ("name", "description", "profile", "knobs"))
        name = table.get("name", str)
        if not ARM_NAME.match(name):
            raise table.error("name", f"{name!r}: use letters, digits, '_', '.', '-'")
        knobs = table.get("knobs", dict, {})
        for knob, value in knobs.items():
            if isinstance(value, (dict, list)):
                raise DesignError(f"{where}: arms[{i}].knobs.{knob}: expected a single value, got {value!r}")
        arms.append(
            Arm(
                name=name,
                profile=table.get("profile", str, profile),
                knobs=tuple(sorted(knobs.items())),
                description=table.get("description", str, ""),
            )
        )
    if arms[0].name == arms[1].name:
        raise DesignError(f"{where}: arms[1].name: {arms[1].name!r} is used twice")
    return arms[0], arms[1]


def _parse_workload(raw: Any, where: str) -> Workload:
    table = Table(
        raw, "workload", where, ("name", "draws", "mode", "requests", "warmup_requests", "max_tokens", "output_tokens")
    )
    draws = table.get("draws", list, [])
    if len(draws) > MAX_WORKLOAD_DRAWS:
        raise table.error("draws", f"{len(draws)} draws; at most {MAX_WORKLOAD_DRAWS}")
    for i, draw in enumerate(draws):
        if isinstance(draw, bool) or not isinstance(draw, (int, str)):
            raise DesignError(f"{where}: workload.draws[{i}]: expected a draw number or name, got {draw!r}")
    requests = table.count("requests", None, maximum=MAX_REQUESTS)
    warmup = table.count("warmup_requests", 0, minimum=0, maximum=MAX_REQUESTS)
    if requests is not None and warmup >= requests:
        raise table.error("warmup_requests", f"{warmup} warm-up requests leave nothing to measure of {requests}")
    mode = table.choice("mode", MODES, "full")
    max_tokens = table.count("max_tokens", None, maximum=MAX_TOKENS)
    if max_tokens is not None and mode != "full":
        raise table.error("max_tokens", 'only mode "full" sends recorded max_tokens (engine mode asks for 1)')
    output_tokens = table.count("output_tokens", 1, maximum=MAX_TOKENS)
    if output_tokens != 1 and mode != "engine":
        raise table.error("output_tokens", 'only mode "engine" asks for a set number of output tokens')
    return Workload(
        name=table.get("name", str),
        draws=tuple(draws),
        mode=mode,
        requests=requests,
        warmup_requests=warmup,
        max_tokens=max_tokens,
        output_tokens=output_tokens,
    )


def _parse_episodes(raw: Any, where: str) -> Episodes:
    table = Table(raw, "episodes", where, ("suite", "draws"))
    suite = table.get("suite", str)
    if not suite.strip():
        raise table.error("suite", "must not be empty")
    return Episodes(suite=suite, draws=table.count("draws", 1, maximum=MAX_EPISODE_DRAWS))


def _parse_rule(
    raw: dict[str, Any], where: str, kind: str, names: tuple[str, ...], live_criteria: bool = False
) -> Rule:
    table = Table(raw, "rule", where, ("test", "treatment", "control", "direction", "alpha", "require_all", "criteria"))
    test = table.choice("test", ("sign", "permutation", "criteria"))
    # a balanced design that runs episodes may decide by criteria (the seed's adoption rule) on live starts
    live = live_criteria and kind == "balanced" and test == "criteria"
    if TESTS[kind] != test and not live:
        raise table.error(
            "test",
            f"a {kind!r} design uses the {TESTS[kind]!r} test, not {test!r}"
            + (" (criteria on live starts: a 'balanced' design with [episodes])" if test == "criteria" else ""),
        )
    treatment, control = table.get("treatment", str), table.get("control", str)
    for key, value in (("treatment", treatment), ("control", control)):
        if value not in names:
            raise table.error(key, f"{value!r} is not an arm ({', '.join(names)})")
    if treatment == control:
        raise table.error("control", "must name the other arm than treatment")
    alpha = table.get("alpha", (int, float), None, what="a number")
    if alpha is not None and not 0 < alpha < 1:
        raise table.error("alpha", f"must be between 0 and 1, got {alpha}")
    direction = table.choice("direction", DIRECTIONS, "lower" if test != "criteria" else None)
    require_all = table.get("require_all", bool, test == "sign")
    criteria: list[Criterion] = []
    if test == "permutation" and alpha is None:
        raise table.error("alpha", "missing required field (a permutation test decides at alpha)")
    if test == "sign" and not require_all and alpha is None:
        raise table.error("alpha", "a sign test needs require_all = true, an alpha, or both")
    if test == "criteria":
        for key in ("alpha", "direction", "require_all"):
            if key in raw:
                raise table.error(key, "a criteria rule states each criterion's comparison instead")
        items = table.get("criteria", list, what="an array of [[rule.criteria]] tables")
        if not items:
            raise table.error("criteria", "must list at least one criterion")
        for i, item in enumerate(items):
            ctable = Table(item, f"rule.criteria[{i}]", where, ("measure", "aggregate", "compare", "margin"))
            margin = ctable.get("margin", (int, float), 0, what="a number")
            if margin < 0:
                raise ctable.error("margin", f"must be 0 or more, got {margin}")
            criteria.append(
                Criterion(
                    measure=ctable.get("measure", str),
                    aggregate=ctable.choice("aggregate", AGGREGATES, "sum"),
                    compare=ctable.choice("compare", COMPARES),
                    margin=float(margin),
                )
            )
    elif "criteria" in raw:
        raise table.error("criteria", f"only a criteria rule has criteria (this is a {test} test)")
    return Rule(
        test=test,
        treatment=treatment,
        control=control,
        direction=direction or "",
        alpha=float(alpha) if alpha is not None else None,
        require_all=require_all,
        criteria=tuple(criteria),
    )


def _parse_guards(raw: Any, where: str) -> Guards:
    table = Table(
        raw, "guards", where, ("prompt_token_ids_identical", "no_failed_requests", "checks", "outputs_identical")
    )
    checks = table.get("checks", list, [])
    for i, check in enumerate(checks):
        if not isinstance(check, str) or not check:
            raise DesignError(f"{where}: guards.checks[{i}]: expected a check name, got {check!r}")
    return Guards(
        prompt_token_ids_identical=table.get("prompt_token_ids_identical", bool, False),
        no_failed_requests=table.get("no_failed_requests", bool, True),
        checks=tuple(checks),
        outputs_identical=table.get("outputs_identical", bool, False),
    )


def _parse_failure(raw: Any, where: str, kind: str) -> Failure:
    table = Table(raw, "failure", where, ("action", "max_retries"))
    action = table.choice("action", FAILURE_ACTIONS, "retry")
    if action == "void_block" and kind != "blocks":
        raise table.error("action", f"only a 'blocks' design has blocks to void (this one is {kind!r})")
    max_retries = table.count("max_retries", 1, minimum=0, maximum=MAX_RETRIES)
    if action == "void_block" and "max_retries" in table.data:
        raise table.error("max_retries", 'void_block does not retry; use action = "retry" to retry')
    return Failure(action=action, max_retries=max_retries if action == "retry" else 0)


def _parse_revert(raw: Any, where: str) -> Revert:
    table = Table(
        raw, "revert", where, ("description", "treatment_only_failures", "max_worse_pct", "fidelity_regression")
    )
    worse = table.get("max_worse_pct", (int, float), None, what="a number")
    if worse is not None and worse < 0:
        raise table.error("max_worse_pct", f"must be 0 or more, got {worse}")
    only = table.get("treatment_only_failures", bool, False)
    fidelity = table.get("fidelity_regression", bool, False)
    if not only and worse is None and not fidelity:
        raise table.error(
            "",
            "a revert rule needs treatment_only_failures = true, max_worse_pct, "
            "fidelity_regression = true, or a combination",
        )
    return Revert(
        description=table.get("description", str, ""),
        treatment_only_failures=only,
        max_worse_pct=float(worse) if worse is not None else None,
        fidelity_regression=fidelity,
    )


def check_arm_profiles(design: Design, where: str) -> None:
    """Each arm's profile exists, its knob values are allowed, and its engine kind can take the design's
    measure and guards (registration checks this; every error names the field)."""
    if not design.runnable:
        return
    from frank.engine.kinds import kind_of
    from frank.engine.profiles import ProfileError, load_profile

    if design.fidelity is not None:
        check_sets(design.fidelity, where)
    served: dict[str, str] = {}
    prints: dict[str, str | None] = {}
    for i, arm in enumerate(design.arms):
        field = "profile" if arm.profile == design.profile else f"arms[{i}].profile"
        try:
            profile = load_profile(arm.profile)
        except ProfileError as exc:
            raise DesignError(f"{where}: {field}: {exc} (arm {arm.name!r})") from None
        kind = kind_of(profile)
        try:
            profile.resolve_knobs(arm.knob_dict)
        except ProfileError as exc:
            raise DesignError(
                f"{where}: arms[{i}].knobs: {exc} (arm {arm.name!r} runs {profile.name}, a {kind.label} engine)"
            ) from None
        for asked, needs, named in _KIND_NEEDS:
            lacking = asked(design) and kind.lacks.get(needs)
            if lacking:
                raise DesignError(
                    f"{where}: {named}: arm {arm.name!r} runs {profile.name}, a {kind.label} engine: {lacking}"
                )
        served[arm.name] = profile.model_path()
        prints[arm.name] = _model_fingerprint(profile)
    if design.fidelity is None:
        return
    (a, ma), (b, mb) = served.items()
    (_, pa), (_, pb) = prints.items()
    same = pa == pb if pa and pb else not (pa or pb) and ma == mb
    if not same:  # a served name is a label: the fingerprints (or, off this machine, the files) decide
        files = f"fingerprints {pb[:12]} and {pa[:12]}" if pa and pb else f"files {mb} and {ma}"
        raise DesignError(
            f"{where}: arms[1].profile: arm {b!r} and arm {a!r} serve different model files ({files}): the "
            "fidelity rule compares each arm's KL against one reference model, so both arms must serve the same "
            "model"
        )


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


def canonical_dict(design: Design) -> dict[str, Any]:
    rule = design.rule
    out: dict[str, Any] = {
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
    if design.revert is not None and design.revert.fidelity_regression:
        out["revert"]["fidelity_regression"] = True
    if design.stop_when_decided:
        out["design"]["stop_when_decided"] = True
    return out


def canonical_json(design: Design) -> str:
    return json.dumps(canonical_dict(design), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
