"""The schema of a design file (frank.tomlfile: strict types, unknown fields refused, each refusal at its
line): what each table may hold, its types, choices and bounds. What ties fields together (an arm the rule
names, a field only one kind of design has) is frank.experiments.design's, which reads the checked tables.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from frank.experiments.fidelity import FidelitySchema
from frank.experiments.tables import NonEmpty, NonNegative, bounded, one_of
from frank.tomlfile import Strict

KINDS = ("blocks", "balanced", "external")
TESTS = {"blocks": "sign", "balanced": "permutation", "external": "criteria"}
DIRECTIONS = ("lower", "higher")
FAILURE_ACTIONS = ("retry", "void_block")
MODES = ("engine", "full")
AGGREGATES = ("sum", "mean")
# [measure].aggregate: how a start's steps become its value (docs/experiments.md, "Measures"): the mean is
# the start's decode seconds over its decode steps, the median that of its steps' times as the client saw them
MEASURE_AGGREGATES = ("mean", "median")
COMPARES = ("lower", "higher", "not_higher", "not_lower")
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


def _arm_name(name: str) -> str:
    if not ARM_NAME.match(name):
        raise ValueError(f"{name!r}: use letters, digits, '_', '.', '-'")
    return name


ArmName = Annotated[str, AfterValidator(_arm_name)]


class ArmSchema(Strict):
    name: ArmName
    description: str = ""
    profile: str | None = None  # the design's profile unless given
    knobs: dict[str, Any] = Field(default_factory=dict)  # single values (checked with the arm's profile)


class KindSchema(Strict):
    """[design]: how the engine starts are ordered."""

    kind: Annotated[str, one_of(KINDS)]
    blocks: Annotated[int, bounded(1, MAX_BLOCKS)] | None = None
    starts_per_arm: Annotated[int, bounded(1, MAX_STARTS_PER_ARM)] | None = None
    order: list[str] = Field(default_factory=list, max_length=2 * MAX_BLOCKS)
    stop_when_decided: bool = False
    hosts: list[Any] | None = None


class WorkloadSchema(Strict):
    name: str
    draws: list[Any] = Field(default_factory=list, max_length=MAX_WORKLOAD_DRAWS)
    mode: Annotated[str, one_of(MODES)] = "full"
    requests: Annotated[int, bounded(1, MAX_REQUESTS)] | None = None
    warmup_requests: Annotated[int, bounded(0, MAX_REQUESTS)] = 0
    max_tokens: Annotated[int, bounded(1, MAX_TOKENS)] | None = None
    output_tokens: Annotated[int, bounded(1, MAX_TOKENS)] = 1


class EpisodesSchema(Strict):
    suite: NonEmpty
    draws: Annotated[int, bounded(1, MAX_EPISODE_DRAWS)] = 1


class MeasureSchema(Strict):
    name: str
    aggregate: Annotated[str, one_of(MEASURE_AGGREGATES)] = "mean"


class CriterionSchema(Strict):
    measure: str
    aggregate: Annotated[str, one_of(AGGREGATES)] = "sum"
    compare: Annotated[str, one_of(COMPARES)]
    margin: NonNegative = 0.0


def _alpha(value: float) -> float:
    if not 0 < value < 1:
        raise ValueError(f"must be between 0 and 1, got {value:g}")
    return value


class RuleSchema(Strict):
    test: Annotated[str, one_of(tuple(dict.fromkeys(TESTS.values())))]
    treatment: str
    control: str
    direction: Annotated[str, one_of(DIRECTIONS)] | None = None
    alpha: Annotated[float, AfterValidator(_alpha)] | None = None
    require_all: bool | None = None  # default: a sign test's
    criteria: list[CriterionSchema] | None = None


class GuardsSchema(Strict):
    prompt_token_ids_identical: bool = False
    no_failed_requests: bool = True
    checks: list[Any] = Field(default_factory=list)
    outputs_identical: bool = False


class FailureSchema(Strict):
    action: Annotated[str, one_of(FAILURE_ACTIONS)] = "retry"
    max_retries: Annotated[int, bounded(0, MAX_RETRIES)] = 1


class RevertSchema(Strict):
    description: str = ""
    treatment_only_failures: bool = False
    max_worse_pct: NonNegative | None = None
    fidelity_regression: bool = False


class Heading(Strict):
    """What a design and a screen both begin with."""

    name: NonEmpty
    question: str
    description: str = ""
    profile: str = "embedded-cpu"


class DesignSchema(Heading):
    arms: list[ArmSchema]
    design: KindSchema
    workload: WorkloadSchema | None = None
    episodes: EpisodesSchema | None = None
    measure: MeasureSchema | None = None
    rule: RuleSchema
    guards: GuardsSchema = Field(default_factory=GuardsSchema)
    failure: FailureSchema = Field(default_factory=FailureSchema)
    revert: RevertSchema | None = None
    fidelity: FidelitySchema | None = None
