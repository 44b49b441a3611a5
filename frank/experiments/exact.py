"""Exact tests (scipy) and the smallest p-value a design can reach.

- Sign test over blocks: the number of blocks where the treatment wins, against Binomial(k, 1/2),
  one-sided (`scipy.stats.binomtest`). A tie counts as not a win (conservative). 5 of 5: p = 1/32.
- Permutation test over a balanced design: difference of arm means, every one of the C(2n, n)
  relabellings enumerated (`scipy.stats.permutation_test`, `n_resamples=np.inf`), one-sided in the
  rule's direction. 4+4 with every treatment start below every control start: p = 1/70.

Attainable significance is discrete: k blocks never give p below 1/2^k, n+n starts never below
1/C(2n, n). Registration refuses an alpha below that.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from frank.experiments.design import Design, DesignError


@dataclass(frozen=True)
class TestResult:
    p_value: float
    null_size: int  # how many equally likely outcomes the exact null distribution has
    statistic: float  # wins (sign) or difference of means, treatment minus control (permutation)


def sign_test(wins: int, blocks: int) -> TestResult:
    if blocks == 0:
        return TestResult(p_value=1.0, null_size=1, statistic=0.0)
    from scipy import stats  # here, not at the top: importing scipy.stats costs every `frank` command a second

    p = stats.binomtest(wins, blocks, 0.5, alternative="greater").pvalue
    return TestResult(p_value=float(p), null_size=2**blocks, statistic=float(wins))


def _mean_diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    value: np.ndarray = np.mean(x, axis=axis) - np.mean(y, axis=axis)
    return value


def permutation_test(treatment: Sequence[float], control: Sequence[float], direction: str) -> TestResult:
    """One-sided exact test that the treatment's values are lower (or higher) than the control's."""
    t, c = np.asarray(treatment, dtype=float), np.asarray(control, dtype=float)
    if len(t) == 0 or len(c) == 0:
        return TestResult(p_value=1.0, null_size=1, statistic=float("nan"))
    if min(len(t), len(c)) < 2:  # scipy needs two per arm; a 1+n design is enumerated here, the same test
        return _enumerated(t, c, direction)
    from scipy import stats

    res = stats.permutation_test(
        (t, c),
        _mean_diff,
        permutation_type="independent",
        vectorized=True,
        n_resamples=np.inf,
        alternative="less" if direction == "lower" else "greater",
    )
    return TestResult(
        p_value=float(res.pvalue), null_size=int(len(res.null_distribution)), statistic=float(res.statistic)
    )


def _enumerated(t: np.ndarray, c: np.ndarray, direction: str) -> TestResult:
    """Every relabelling of the pooled values into a treatment of len(t), the statistic's share at or beyond
    the observed one (the observed labelling counts): what scipy's exact test computes."""
    pooled = np.concatenate([t, c])
    observed = float(np.mean(t) - np.mean(c))
    diffs = []
    for idx in itertools.combinations(range(len(pooled)), len(t)):
        mask = np.zeros(len(pooled), dtype=bool)
        mask[list(idx)] = True
        diffs.append(float(np.mean(pooled[mask]) - np.mean(pooled[~mask])))
    eps = 1e-12 * max(1.0, abs(observed))  # scipy's tolerance for ties of the statistic
    beyond = sum(1 for d in diffs if (d <= observed + eps if direction == "lower" else d >= observed - eps))
    return TestResult(p_value=beyond / len(diffs), null_size=len(diffs), statistic=observed)


def null_size(design: Design) -> int | None:
    if design.kind == "blocks":
        value: int | None = 2 ** int(design.blocks or 0)
        return value
    if design.kind == "balanced":
        n = int(design.starts_per_arm or 0)
        return math.comb(2 * n, n)
    return None


def smallest_p(design: Design) -> float | None:
    """The smallest p-value the design can ever give (None: no p-value, an external criteria rule)."""
    size = null_size(design)
    return 1.0 / size if size else None


def check_reachable(design: Design, where: str = "<design>") -> None:
    """Refuse a rule that can never be met, naming the field."""
    low, alpha = smallest_p(design), design.rule.alpha
    if low is None or alpha is None:
        return
    if alpha < low:
        size = null_size(design)
        what = (
            f"{design.blocks} blocks"
            if design.kind == "blocks"
            else f"{design.starts_per_arm}+{design.starts_per_arm} starts"
        )
        raise DesignError(
            f"{where}: rule.alpha: {alpha:g} can never be met: {what} give at best "
            f"p = 1/{size} = {low:.4g}; add blocks or starts, or raise alpha"
        )


def fraction(p: float, size: int | None) -> str:
    """p as k/N (N: the null's equally likely outcomes) when it is a whole count of them: 1/32, 2/70."""
    if not size:
        return f"{p:.4g}"
    count = p * size
    if abs(count - round(count)) < 1e-6 and round(count) > 0:
        return "1" if round(count) == size else f"{int(round(count))}/{size}"
    return f"{p:.4g}"
