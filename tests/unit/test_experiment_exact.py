from __future__ import annotations

import pytest

from frank.experiments import exact
from frank.experiments.design import parse_design_text
from tests.unit.experiment_helpers import BALANCED_DESIGN, BLOCKS_DESIGN


@pytest.mark.parametrize(
    ("wins", "blocks", "p"),
    [
        (5, 5, 1 / 32),
        (4, 4, 1 / 16),
        (3, 3, 1 / 8),
        (10, 10, 1 / 1024),
        (4, 5, 6 / 32),  # P(X >= 4) = (5 + 1) / 32
        (0, 5, 1.0),
        (9, 10, 11 / 1024),
    ],
)
def test_sign_test_hand_values(wins: int, blocks: int, p: float) -> None:
    res = exact.sign_test(wins, blocks)
    assert res.p_value == pytest.approx(p, rel=1e-12)
    assert res.null_size == 2**blocks


def test_permutation_seed_cache_table_is_one_in_seventy() -> None:
    on = [1.212, 1.173, 1.159, 1.234]
    off = [6.640, 6.710, 6.770, 6.927]
    res = exact.permutation_test(on, off, "lower")
    assert res.p_value == pytest.approx(1 / 70, rel=1e-12) and res.null_size == 70
    assert res.statistic == pytest.approx(-5.56725)
    # the other direction: as unlikely as it gets the wrong way round
    assert exact.permutation_test(on, off, "higher").p_value == pytest.approx(1.0)


def test_permutation_hand_values() -> None:
    # one swap between the arms: 2 relabellings are at least as extreme (observed, and full separation)
    res = exact.permutation_test([1, 2, 3, 5], [4, 6, 7, 8], "lower")
    assert res.p_value == pytest.approx(2 / 70)
    assert exact.permutation_test([1, 2, 3], [4, 5, 6], "lower").p_value == pytest.approx(1 / 20)
    assert exact.permutation_test([5.0, 6.0], [1.0, 2.0], "higher").p_value == pytest.approx(1 / 6)


def test_smallest_p_and_fraction() -> None:
    blocks = parse_design_text(BLOCKS_DESIGN)
    assert exact.smallest_p(blocks) == pytest.approx(1 / 8) and exact.null_size(blocks) == 8
    balanced = parse_design_text(BALANCED_DESIGN)
    assert exact.smallest_p(balanced) == pytest.approx(1 / 20)
    assert exact.fraction(1 / 32, 32) == "1/32"
    assert exact.fraction(2 / 70, 70) == "2/70"
    assert exact.fraction(0.0123, 70) == "0.0123"


def test_one_start_per_arm_is_enumerated_like_scipy_does_two():
    from frank.experiments.exact import _enumerated, permutation_test

    one = permutation_test([1.0], [2.0], "lower")
    assert (one.p_value, one.null_size) == (0.5, 2)  # 1+1: two labellings, the observed one is the best
    assert permutation_test([3.0], [2.0], "lower").p_value == 1.0
    assert permutation_test([1.0], [2.0, 3.0], "lower").p_value == pytest.approx(1 / 3)
    import numpy as np

    for t, c in (([1.0, 1.5], [2.0, 3.0]), ([1.0, 2.5], [2.0, 3.0]), ([2.0, 2.0], [2.0, 1.0])):
        for direction in ("lower", "higher"):
            ours = _enumerated(np.array(t), np.array(c), direction)
            assert ours.p_value == pytest.approx(permutation_test(t, c, direction).p_value)
