"""Stopping when decided: whether the starts still to run can change a design's decision.

A design with `[design] stop_when_decided = true` stops as soon as no remaining start can change what its
frozen rule decides. That is read off the two extreme completions of what is measured so far:

- sign test (`blocks`): every remaining block a win, or every remaining block a loss. The verdict is
  monotone in the wins (a voided block lies between a win and a loss), so if both extremes give the same
  verdict, every completion does. Under `require_all` the first loss, tie or voided block decides "not
  confirmed"; under an alpha the threshold may also be out of reach, or reached whatever comes.
- permutation test (`balanced`): every remaining treatment start far on the favourable side and every
  remaining control start far on the other, and the reverse. The one-sided p is monotone in each unmeasured
  value (moving one treatment value in the favourable direction moves the observed difference and every
  relabelling that keeps it in the treatment group alike, and the others away), so these two corners bound
  every completion's p. With unbounded measures the threshold can be found out of reach early, but never
  reached whatever comes while a start remains.

A stop is only ever read off a prefix of the drawn order: the runner runs blocks (starts) in order, so the
measured ones are blocks 1..N (starts 1..N). Measures with a gap before the last measured one (a CSV that
leaves out an unfavourable block, say) are not a stopped run: they stay incomplete. The p of a stopped run
is the p of the blocks (starts) it finished.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from frank.experiments import exact
from frank.experiments.design import Design
from frank.experiments.tally import BlockTally, by_block, tally_blocks

StopVerdict = Literal["confirmed", "not confirmed"]


@dataclass(frozen=True)
class Stop:
    """The decision a design reached before its last start, and why no remaining start could change it."""

    verdict: StopVerdict
    unit: Literal["block", "start"]
    after: int  # the last block (start) run: blocks (starts) 1..after decided it
    of: int  # the design's blocks (starts)
    reason: str
    best_p: float | None  # the p if every remaining start went the treatment's way
    worst_p: float | None  # ... and if every one went against it

    @property
    def left(self) -> int:
        return self.of - self.after

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "left": self.left}

    def summary(self) -> str:
        return f"stopped when decided after {self.unit} {self.after} of {self.of}: {self.reason}"


# -- the sign test over blocks ------------------------------------------------------------------------


def _sign_confirms(design: Design, wins: int, tested: int) -> bool:
    """The rule's verdict on a finished run with `wins` of `tested` complete blocks (report._blocks' rule)."""
    rule = design.rule
    if rule.require_all and wins < int(design.blocks or 0):
        return False
    return rule.alpha is None or exact.sign_test(wins, tested).p_value <= rule.alpha


def sign_p_bounds(tally: BlockTally) -> tuple[float | None, float | None]:
    """(best, worst): the sign test's p over the design's blocks if every block still missing is a win, or
    a loss (voided blocks are out of the test). None when no block can be tested."""
    k = tally.complete + tally.missing
    if k == 0:
        return None, None
    return exact.sign_test(tally.wins + tally.missing, k).p_value, exact.sign_test(tally.wins, k).p_value


def blocks_stop(design: Design, tally: BlockTally) -> Stop | None:
    """The stop of a `blocks` design with stop_when_decided, from its tally; None: not decided yet (or no
    stop: the design runs to the end, or every block is measured)."""
    if not design.stop_when_decided or design.kind != "blocks" or tally.missing == 0:
        return None
    finished = [b.block for b in tally.blocks if b.voided or b.sign is not None]
    after = max(finished, default=0)
    if after == 0 or finished != list(range(1, after + 1)):
        return None  # not a prefix of the order: a gap is not a stop
    m, w, k = tally.missing, tally.wins, int(design.blocks or 0)
    best = _sign_confirms(design, w + m, tally.complete + m)
    worst = _sign_confirms(design, w, tally.complete + m)
    if best != worst:
        return None
    rule = design.rule
    best_p, worst_p = sign_p_bounds(tally)
    word = "lower" if rule.direction == "lower" else "higher"
    if not best:
        if rule.require_all and (tally.losses or tally.ties or tally.voided):
            reason = (
                f"{rule.treatment} was {word} in {w} of {after} blocks run; the rule needs all {k}, "
                "which no remaining block can give"
            )
        else:
            reason = (
                f"even if all {m} remaining blocks went to {rule.treatment}, the sign test's p would be "
                f"{exact.fraction(best_p or 1.0, 2 ** (tally.complete + m))} > alpha {rule.alpha:g}"
            )
        return Stop("not confirmed", "block", after, k, reason, best_p, worst_p)
    reason = (
        f"{rule.treatment} was {word} in {w} of {after} blocks run; even if all {m} remaining blocks went "
        f"against it, p = {exact.fraction(worst_p or 1.0, 2 ** (tally.complete + m))} <= alpha {rule.alpha:g}"
    )
    return Stop("confirmed", "block", after, k, reason, best_p, worst_p)


# -- the permutation test over balanced starts --------------------------------------------------------


def _filled(
    design: Design, measured: Sequence[tuple[str, float]], left: Mapping[str, int], favourable: bool
) -> tuple[list[float], list[float]]:
    """Treatment and control values with every start still to run set far out: on the treatment's good side
    (favourable) or its bad side. Far enough that a pending start decides its side, near enough that the
    measured values still order the relabellings in floating point (1e18 swallowed them: every one tied)."""
    rule = design.rule
    values = [v for _, v in measured]
    span = (max(values) - min(values) if values else 0.0) or 1.0
    low, high = min(values, default=0.0) - 1000 * span, max(values, default=0.0) + 1000 * span
    good, bad = (low, high) if rule.direction == "lower" else (high, low)
    if not favourable:
        good, bad = bad, good
    tvals = [v for arm, v in measured if arm == rule.treatment] + [good] * left.get(rule.treatment, 0)
    cvals = [v for arm, v in measured if arm == rule.control] + [bad] * left.get(rule.control, 0)
    return tvals, cvals


def permutation_p_bounds(design: Design, measured: Sequence[tuple[str, float]]) -> tuple[float, float]:
    """(best, worst) one-sided permutation p over the design's 2n starts, the unmeasured ones set far out."""
    n = int(design.starts_per_arm or 0)
    arms = (design.rule.treatment, design.rule.control)
    left = {arm: n - sum(1 for a, _ in measured if a == arm) for arm in arms}
    direction = design.rule.direction
    best = exact.permutation_test(*_filled(design, measured, left, True), direction).p_value
    worst = exact.permutation_test(*_filled(design, measured, left, False), direction).p_value
    return best, worst


def balanced_stop(design: Design, starts: Sequence[tuple[int, str, float]]) -> Stop | None:
    """The stop of a `balanced` design with stop_when_decided from its measured (start, arm, value); None:
    not decided yet, not a prefix of the order, or every start measured."""
    n = int(design.starts_per_arm or 0)
    if not design.stop_when_decided or design.kind != "balanced" or not starts or len(starts) >= 2 * n:
        return None
    numbers = sorted(s for s, _, _ in starts)
    if numbers != list(range(1, len(numbers) + 1)):
        return None
    rule = design.rule
    assert rule.alpha is not None
    best, worst = permutation_p_bounds(design, [(arm, value) for _, arm, value in starts])
    after, total = len(starts), 2 * n
    size = exact.null_size(design)
    if best > rule.alpha:
        reason = (
            f"even if every remaining start went to {rule.treatment}, the permutation test's p would be "
            f"{exact.fraction(best, size)} > alpha {rule.alpha:g}"
        )
        return Stop("not confirmed", "start", after, total, reason, best, worst)
    if worst <= rule.alpha:
        reason = f"even if every remaining start went against {rule.treatment}, p = {exact.fraction(worst, size)}"
        return Stop("confirmed", "start", after, total, reason + f" <= alpha {rule.alpha:g}", best, worst)
    return None


# -- from a run's journal -----------------------------------------------------------------------------


def stop_of(
    design: Design, measured: Sequence[tuple[int, int | None, str, float]], voided: Collection[int] = ()
) -> Stop | None:
    """The stop from measured (start, block, arm, value) of a run or a CSV (voided: its voided blocks)."""
    if not design.stop_when_decided:
        return None
    if design.kind == "blocks":
        values = by_block((block, arm, value) for _, block, arm, value in measured)
        return blocks_stop(design, tally_blocks(design, values, voided))
    if design.kind == "balanced":
        return balanced_stop(design, [(start, arm, value) for start, _, arm, value in measured])
    return None
