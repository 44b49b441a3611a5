"""Power from measured noise: how likely a design's own test confirms a true effect, and how many blocks
(or starts) it needs for 80% and 95%.

The noise is the spread S of block effects, in percent: the standard deviation of (treatment - control) /
control x 100 between two engine starts with identical settings, measured by an A/A run (`spread_from_run`)
or given. The model: a block's effect is -X + S z (z standard normal) for a true improvement of X% in the
rule's direction; an engine start's value is mu (1 + s z) with s = S / sqrt(2) per start, so that the
difference of two starts has spread S. Ties have probability zero.

- Sign test (`kind = "blocks"`): a block is a win with probability q = Phi(X / S). The power is exact: the
  binomial probability of the win counts the design's rule confirms (all k blocks with `require_all`; and
  p <= alpha when alpha is set). For other block counts the same test is taken at the same significance
  level (the largest p-value the design's rule confirms: 1/2^k for "all k blocks"): confirm when the exact
  one-sided sign-test p <= that level. With more blocks than the design's, that no longer requires every
  block: 7 blocks at 1/32 confirm with 7 wins only, 9 blocks with 8 of 9.
- Permutation test (`kind = "balanced"`): simulated (seeded): starts drawn from the model, the exact
  one-sided permutation p-value over all C(2n, n) relabellings (as in exact.permutation_test), confirmed
  when p <= alpha. Up to 8 starts per arm (12870 relabellings); more are reported as not reached.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

from frank.errors import FrankError
from frank.experiments.design import Design

if TYPE_CHECKING:
    from frank.experiments.analysis import ExperimentReport

MAX_BLOCKS = 1000
MAX_STARTS_PER_ARM = 8
SIMULATIONS = 4000
SEED = 20261130


class PlanError(FrankError):
    """Power cannot be computed for this design or noise (the message says why)."""


@dataclass(frozen=True)
class Plan:
    design: str
    test: str  # sign | permutation
    size: int  # the design's blocks (sign) or starts per arm (permutation)
    size_unit: str  # "blocks" | "starts per arm"
    effect_pct: float
    spread_pct: float
    spread_source: str
    level: float  # the significance the rule works at (largest confirming p-value)
    power: float  # P(confirmed | true effect effect_pct) with the design as it is
    blocks_for_80: int | None  # smallest size with power >= 0.80 at `level` (None: not within the search)
    blocks_for_95: int | None
    win_probability: float | None  # sign test: P(one block is a win)
    method: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# -- the sign test, exactly -------------------------------------------------------------------------


def _sign_p(wins: int, blocks: int) -> float:
    return float(stats.binom.sf(wins - 1, blocks, 0.5))  # P(W >= wins) under the null


def _design_confirms(design: Design, wins: int) -> bool:
    k, rule = int(design.blocks or 0), design.rule
    if rule.require_all and wins < k:
        return False
    return rule.alpha is None or _sign_p(wins, k) <= rule.alpha


def sign_level(design: Design) -> float:
    """The largest sign-test p-value the design's rule confirms."""
    k = int(design.blocks or 0)
    confirming = [_sign_p(w, k) for w in range(k + 1) if _design_confirms(design, w)]
    if not confirming:
        raise PlanError(f"{design.name}: no outcome of {k} blocks is confirmed by the rule")
    return max(confirming)


def sign_power(blocks: int, q: float, level: float) -> float:
    """P(exact one-sided sign-test p <= level) with `blocks` blocks, each a win with probability q."""
    p = stats.binom.sf(np.arange(blocks + 1) - 1, blocks, 0.5)  # p-value of w wins, w = 0..blocks
    enough = np.nonzero(p <= level + 1e-12)[0]
    if not len(enough):
        return 0.0
    return float(stats.binom.sf(enough[0] - 1, blocks, q))


def _design_sign_power(design: Design, q: float) -> float:
    k = int(design.blocks or 0)
    return float(sum(stats.binom.pmf(w, k, q) for w in range(k + 1) if _design_confirms(design, w)))


# -- the permutation test, simulated ----------------------------------------------------------------


def permutation_power(
    starts_per_arm: int,
    effect_pct: float,
    spread_pct: float,
    alpha: float,
    simulations: int = SIMULATIONS,
    seed: int = SEED,
) -> float:
    """Share of simulated balanced runs whose exact one-sided permutation p (treatment lower) <= alpha."""
    n = starts_per_arm
    if n < 1:
        return 0.0
    groups = np.array(
        [[i in g for i in range(2 * n)] for g in itertools.combinations(range(2 * n), n)], dtype=float
    )  # every relabelling: who is "treatment"
    if 1.0 / len(groups) > alpha:
        return 0.0  # the design can never reach alpha
    reps = max(500, min(simulations, int(1e7 // len(groups))))
    rng = np.random.default_rng(seed)
    s = spread_pct / 100.0 / math.sqrt(2.0)
    confirmed = 0
    for start in range(0, reps, 500):
        m = min(500, reps - start)
        t = (1.0 - effect_pct / 100.0) * (1.0 + s * rng.standard_normal((m, n)))
        c = 1.0 + s * rng.standard_normal((m, n))
        pooled = np.concatenate([t, c], axis=1)
        sums = pooled @ groups.T  # (m, C(2n, n)) treatment sums
        observed = t.sum(axis=1, keepdims=True)
        p = np.mean(sums <= observed * (1 + 1e-12) + 1e-15, axis=1)  # lower mean difference = lower sum
        confirmed += int(np.sum(p <= alpha + 1e-12))
    return confirmed / reps


# -- the plan ---------------------------------------------------------------------------------------


def _smallest(size_power: Any, limit: int, target: float) -> int | None:
    for size in range(1, limit + 1):
        if size_power(size) >= target:
            return size
    return None


def plan(design: Design, spread_pct: float, effect_pct: float, spread_source: str = "given") -> Plan:
    if not spread_pct > 0 or not math.isfinite(spread_pct):
        raise PlanError(f"spread {spread_pct!r}%: expected a positive number of percent")
    if not math.isfinite(effect_pct):
        raise PlanError(f"effect {effect_pct!r}%: expected a number of percent")
    if design.kind == "blocks":
        q = float(stats.norm.cdf(effect_pct / spread_pct))
        level = sign_level(design)
        return Plan(
            design.name,
            "sign",
            int(design.blocks or 0),
            "blocks",
            effect_pct,
            spread_pct,
            spread_source,
            level,
            _design_sign_power(design, q),
            _smallest(lambda k: sign_power(k, q, level), MAX_BLOCKS, 0.80),
            _smallest(lambda k: sign_power(k, q, level), MAX_BLOCKS, 0.95),
            q,
            "exact binomial over block wins, normal block effects",
        )
    if design.kind == "balanced":
        alpha = design.rule.alpha
        assert alpha is not None
        power = {}

        def at(n: int) -> float:
            if n not in power:
                power[n] = permutation_power(n, effect_pct, spread_pct, alpha)
            return power[n]

        return Plan(
            design.name,
            "permutation",
            int(design.starts_per_arm or 0),
            "starts per arm",
            effect_pct,
            spread_pct,
            spread_source,
            alpha,
            at(int(design.starts_per_arm or 0)),
            _smallest(at, MAX_STARTS_PER_ARM, 0.80),
            _smallest(at, MAX_STARTS_PER_ARM, 0.95),
            None,
            f"simulated ({SIMULATIONS} runs; fewer, at least 500, past 5 starts per arm; seed {SEED}), "
            "exact permutation p",
        )
    raise PlanError(f"{design.name}: an external design has no test of its own to plan (kind = external)")


# -- noise from an A/A run ---------------------------------------------------------------------------


def spread_from_report(report: ExperimentReport) -> tuple[float, int, float]:
    """(spread in %, number of effects it rests on, their mean in %) from an A/A run's report: the standard
    deviation of its block effects, or for a balanced run sqrt(2) x the pooled within-arm coefficient of
    variation of its starts."""
    run_id = report.run.run_id if report.run else None
    if report.blocks is not None:
        effects = [b.effect_pct for b in report.blocks.blocks if b.effect_pct is not None]
        if len(effects) < 2:
            raise PlanError(f"run {run_id}: {len(effects)} block effect(s) measured; the spread needs at least 2")
        return statistics.stdev(effects), len(effects), statistics.fmean(effects)
    if report.comparison is not None:
        by_arm: dict[str, list[float]] = {}
        for s in report.starts or ():
            by_arm.setdefault(s.arm, []).append(float(s.value))
        cvs = [(statistics.variance(v) / statistics.fmean(v) ** 2, len(v) - 1) for v in by_arm.values() if len(v) > 1]
        dof = sum(d for _, d in cvs)
        if not dof:
            raise PlanError(f"run {run_id}: fewer than 2 starts in an arm; no spread")
        cv = math.sqrt(sum(c * d for c, d in cvs) / dof)
        return cv * math.sqrt(2.0) * 100.0, dof + len(cvs), 0.0
    raise PlanError(f"run {run_id}: a {report.kind} run has no start-to-start spread")


def spread_from_run(run_id: str) -> tuple[float, int, float]:
    from frank.experiments import registry
    from frank.experiments.report import report_for_run

    return spread_from_report(report_for_run(registry.load_run(run_id, verify=False)))


def is_aa(design: Design) -> bool:
    """Both arms start the engine the same way (same profile, same knobs): any effect is noise."""
    a, b = design.arms
    return a.profile == b.profile and a.knob_dict == b.knob_dict


def latest_aa_spread(measure: str) -> tuple[float, str] | None:
    """(spread %, "run RUN_ID (n effects)") of the newest A/A run on `measure` with a spread, or None."""
    from frank.experiments import registry

    for meta in reversed(registry.list_runs()):
        run_id = meta.get("run_id")
        try:
            run = registry.load_run(run_id, verify=False)
            if not is_aa(run.design) or run.design.measure != measure:
                continue
            spread, n, _ = spread_from_run(run_id)
        except (FrankError, KeyError, OSError, ValueError):
            continue
        return spread, f"A/A run {run_id} ({n} effects)"
    return None


def format_plan(p: Plan) -> str:
    """One line for people: the power, then what 80% and 95% need."""

    def need(n: int | None) -> str:
        return f"{n} {p.size_unit}" if n is not None else "not within the search"

    from frank.experiments.exact import fraction

    test = "sign test" if p.test == "sign" else "permutation test"
    level = fraction(p.level, 2**p.size) if p.test == "sign" else f"{p.level:g}"
    return (
        f"power {p.power:.2f} to confirm a true {p.effect_pct:g}% effect with {p.size} {p.size_unit} "
        f"({test} at p <= {level}; spread {p.spread_pct:.3g}%, {p.spread_source}); "
        f"80%: {need(p.blocks_for_80)}, 95%: {need(p.blocks_for_95)}"
    )
