"""The block tally: per block the treatment's value against the control's, its sign, and the sign test.

One function, `tally_blocks`, serves the live board (`board.load_state`) and the decision
(`analysis.analyze`), so the two can never count differently. Under the frozen rule a voided block counts in
neither the wins, the losses nor the ties, and it is not waited for: it is out of the test. A block with
both values is complete; one without is missing (still to measure) unless it was voided. The p-value is
the one-sided exact sign test of the wins over the complete blocks (a tie counts as not a win).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from statistics import mean

from frank.experiments import exact
from frank.experiments.design import Design


def effect_pct(treatment: float, control: float) -> float | None:
    """The treatment against the control, in percent of the control."""
    if control == 0 or math.isnan(control):
        return None
    return (treatment - control) / control * 100.0


def sign(design: Design, treatment: float, control: float) -> str:
    """ "+" the treatment wins in the rule's direction, "-" it loses, "=" a tie."""
    if treatment == control:
        return "="
    better = treatment < control if design.rule.direction == "lower" else treatment > control
    return "+" if better else "-"


@dataclass(frozen=True)
class BlockResult:
    block: int
    values: dict[str, float | None]  # arm -> value (a voided block keeps what was measured, for the record)
    effect_pct: float | None  # None: not complete, or voided
    sign: str | None  # "+", "-", "=", or None: not complete, or voided
    voided: bool = False


@dataclass(frozen=True)
class BlockTally:
    blocks: tuple[BlockResult, ...]
    wins: int
    losses: int
    ties: int
    voided: tuple[int, ...]
    missing: int  # blocks neither complete nor voided

    @property
    def complete(self) -> int:
        return self.wins + self.losses + self.ties

    @property
    def test(self) -> exact.TestResult | None:
        """The sign test over the complete blocks; None before any block is complete."""
        return exact.sign_test(self.wins, self.complete) if self.complete else None

    @property
    def p_value(self) -> float | None:
        test = self.test
        return test.p_value if test else None

    @property
    def mean_effect_pct(self) -> float | None:
        effects = [b.effect_pct for b in self.blocks if b.effect_pct is not None]
        return mean(effects) if effects else None


def by_block(rows: Iterable[tuple[int | None, str, float | None]]) -> dict[int, dict[str, float | None]]:
    """(block, arm, value) rows as `tally_blocks` takes them: block -> arm -> value (rows without a block,
    a balanced design's, left out)."""
    values: dict[int, dict[str, float | None]] = {}
    for block, arm, value in rows:
        if block is not None:
            values.setdefault(block, {})[arm] = value
    return values


def tally_blocks(
    design: Design, values: Mapping[int, Mapping[str, float | None]], voided: Collection[int] = ()
) -> BlockTally:
    """`values`: block (1-based) -> arm -> measured value (absent or None: not measured)."""
    rule = design.rule
    out: list[BlockResult] = []
    w = l = t = missing = 0
    for block in range(1, int(design.blocks or 0) + 1):
        measured = dict(values.get(block, {}))
        tv, cv = measured.get(rule.treatment), measured.get(rule.control)
        if block in voided:
            out.append(BlockResult(block, measured, None, None, voided=True))
            continue
        if tv is None or cv is None:
            missing += 1
            out.append(BlockResult(block, measured, None, None))
            continue
        s = sign(design, tv, cv)
        w, l, t = w + (s == "+"), l + (s == "-"), t + (s == "=")
        out.append(BlockResult(block, measured, effect_pct(tv, cv), s))
    return BlockTally(tuple(out), w, l, t, tuple(sorted(voided)), missing)
