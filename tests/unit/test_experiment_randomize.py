from __future__ import annotations

import math
from collections import Counter

from scipy import stats

from frank.experiments.design import parse_design_text
from frank.experiments.randomize import draw_order, order_count, unrank
from tests.unit.experiment_helpers import BALANCED_DESIGN, BLOCKS_DESIGN


def _design(text: str, old: str, new: str):
    return parse_design_text(text.replace(old, new))


def test_counts() -> None:
    assert order_count(parse_design_text(BLOCKS_DESIGN)) == 2**3
    assert order_count(_design(BLOCKS_DESIGN, "blocks = 3", "blocks = 5")) == 32
    assert order_count(parse_design_text(BALANCED_DESIGN)) == 20
    assert order_count(_design(BALANCED_DESIGN, "starts_per_arm = 3", "starts_per_arm = 4")) == 70


def test_unranking_is_a_bijection_onto_valid_orders() -> None:
    blocks = parse_design_text(BLOCKS_DESIGN)
    seen = set()
    for index in range(order_count(blocks)):
        slots = unrank(blocks, index)
        for b in (1, 2, 3):  # one start per arm in each block, blocks in sequence
            assert sorted(s.arm for s in slots if s.block == b) == ["spec-2", "spec-4"]
        assert [s.block for s in slots] == [1, 1, 2, 2, 3, 3]
        seen.add(tuple(s.arm for s in slots))
    assert len(seen) == 8
    balanced = _design(BALANCED_DESIGN, "starts_per_arm = 3", "starts_per_arm = 4")
    orders = {tuple(s.arm for s in unrank(balanced, i)) for i in range(70)}
    assert len(orders) == 70 and all(o.count("on") == 4 for o in orders)
    assert orders == {
        tuple("on" if i in c else "off" for i in range(8)) for c in __import__("itertools").combinations(range(8), 4)
    }


def test_reproducible_from_the_recorded_seed() -> None:
    d = parse_design_text(BALANCED_DESIGN)
    a, b = draw_order(d, 123456789), draw_order(d, 123456789)
    assert a == b and a.seed == 123456789 and 0 <= a.index < 20
    # the order is a pure function of (seed, method): pin one so a change of method cannot go unnoticed
    pinned = draw_order(d, 1)
    assert pinned.index == 4 and [x.arm for x in pinned.slots] == ["on", "off", "on", "on", "off", "off"]
    assert {draw_order(d, seed).index for seed in range(200)} == set(range(20))


def _chi_square_uniform(design, draws: int) -> float:
    count = order_count(design)
    observed = Counter(tuple(s.arm for s in draw_order(design, seed).slots) for seed in range(draws))
    assert len(observed) == count  # every order is reachable
    return stats.chisquare(list(observed.values())).pvalue


def test_blocks_orders_are_uniform() -> None:
    # 8 orders, 4000 draws: a chi-square p below 0.001 would flag a skewed draw
    assert _chi_square_uniform(parse_design_text(BLOCKS_DESIGN), 4000) > 0.001


def test_balanced_orders_are_uniform() -> None:
    four = _design(BALANCED_DESIGN, "starts_per_arm = 3", "starts_per_arm = 4")
    assert _chi_square_uniform(four, 7000) > 0.001  # all 70 orders, about 100 each


def test_chi_square_would_catch_a_biased_draw() -> None:
    # the check itself can fail: a draw that redraws whenever "on" comes first is far from uniform
    four = _design(BALANCED_DESIGN, "starts_per_arm = 3", "starts_per_arm = 4")
    biased: Counter = Counter()
    for seed in range(7000):
        slots = draw_order(four, seed).slots
        if slots[0].arm == "on":
            slots = draw_order(four, seed + 10**6).slots
        biased[tuple(x.arm for x in slots)] += 1
    assert len(biased) == math.comb(8, 4)
    assert stats.chisquare(list(biased.values())).pvalue < 1e-6
