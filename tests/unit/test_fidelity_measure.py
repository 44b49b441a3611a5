"""The fidelity measure on hand-computed values (docs/fidelity.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from frank.fidelity.measure import dense_candidate, mean_kl, position_kl

LN = math.log


def test_tail_bucket_on_each_side():
    # reference top 2: p = 0.5, 0.25 (tail 0.25); candidate: q = 0.25, 0.25 (tail 0.5)
    # KL = 0.5 ln(0.5/0.25) + 0.25 ln(1) + 0.25 ln(0.25/0.5) = 0.25 ln 2
    got = position_kl([5, 7], [LN(0.5), LN(0.25)], {5: LN(0.25), 7: LN(0.25), 9: LN(0.1)})
    assert got.kl == pytest.approx(0.25 * LN(2), rel=1e-12)
    assert got.misses == 0


def test_a_reference_token_the_candidate_missed_joins_the_tail_on_both_sides():
    # 7 is missing: buckets {5} and the tail. p: 0.5 | 0.5, q: 0.25 | 0.75
    # KL = 0.5 ln(0.5/0.25) + 0.5 ln(0.5/0.75) = 0.5 ln(4/3)
    got = position_kl([5, 7], [LN(0.5), LN(0.25)], {5: LN(0.25), 3: LN(0.5)})
    assert got.kl == pytest.approx(0.5 * LN(4 / 3), rel=1e-12)
    assert got.misses == 1


def test_identical_distributions_give_zero_and_the_order_of_the_candidate_does_not_matter():
    ids, lps = [1, 2, 3], [LN(0.3), LN(0.2), LN(0.1)]
    assert position_kl(ids, lps, {3: LN(0.1), 1: LN(0.3), 2: LN(0.2)}).kl == 0.0


def test_all_reference_tokens_missing_compares_nothing_but_the_tail():
    got = position_kl([1, 2], [LN(0.3), LN(0.2)], {9: LN(0.9)})
    assert got.kl == 0.0 and got.misses == 2  # one bucket (everything) on each side


def test_a_candidate_with_no_tail_is_clamped_not_infinite():
    got = position_kl([1], [LN(0.5)], {1: 0.0})  # q puts all its mass on token 1; p leaves 0.5 in the tail
    assert math.isfinite(got.kl) and got.kl > 300  # 0.5 ln 2 + 0.5 (ln 0.5 - ln(float64 tiny))


def test_set_kl_is_the_mean_over_positions():
    ref_ids = np.array([[5, 7], [5, 7]])
    ref_lps = np.log(np.array([[0.5, 0.25], [0.5, 0.25]]))
    cand = [{5: LN(0.25), 7: LN(0.25)}, {5: LN(0.5), 7: LN(0.25)}]
    got = mean_kl(ref_ids, ref_lps, cand)
    assert got.kl == pytest.approx(0.125 * LN(2), rel=1e-12)
    assert (got.positions, got.misses) == (2, 0)
    assert got.max_kl == pytest.approx(0.25 * LN(2), rel=1e-12)


def test_reference_against_itself_is_zero_and_mismatched_lengths_raise():
    ids = np.array([[1, 2], [3, 4]])
    lps = np.log(np.array([[0.4, 0.1], [0.2, 0.1]]))
    assert mean_kl(ids, lps, dense_candidate(ids, lps)).kl == 0.0
    with pytest.raises(ValueError, match="2 reference positions but 1"):
        mean_kl(ids, lps, dense_candidate(ids, lps)[:1])


def test_tiny_tails_keep_their_precision():
    # the tiny model's top 64 hold about 1% of the mass: 1 - sum must not lose the difference
    p = np.full(64, LN(1.5e-4))
    q = {i: LN(1.5e-4) + 1e-6 for i in range(64)}
    got = position_kl(list(range(64)), p, q)
    p_b, q_b = 64 * 1.5e-4, 64 * 1.5e-4 * math.exp(1e-6)
    expected = p_b * -1e-6 + (1 - p_b) * LN((1 - p_b) / (1 - q_b))
    assert got.kl == pytest.approx(expected, rel=1e-6)
    assert got.kl > 0


def test_an_engines_own_top_k_drops_vllms_extra_actual_token_so_it_counts_as_a_miss():
    """vLLM adds the actual next token beyond its top k; llama.cpp cannot: both kinds keep only their top k."""
    from frank.fidelity.candidate import own_top_k

    row = {5: -0.1, 7: -1.0, 9: -9.0}  # 9: the actual next token, ranked 3rd
    assert own_top_k(row, 2) == {5: -0.1, 7: -1.0} and own_top_k(row, 3) == row
    assert position_kl([5, 9], [-0.2, -2.0], own_top_k(row, 2)).misses == 1


def test_a_run_is_named_by_a_prefix_of_its_id_and_a_prefix_two_share_is_refused_as_such(fresh_frank_home):
    import json

    from frank.errors import FrankError
    from frank.fidelity.runs import fidelity_runs_dir, load_run

    for n, run_id in enumerate(("20261207-152523-run-a1b2", "20261207-152523-run-c3d4")):  # the same second
        folder = fidelity_runs_dir() / run_id
        folder.mkdir(parents=True)
        (folder / "run.json").write_text(json.dumps({"id": run_id, "created_at": n}))
    assert load_run("20261207-152523-run-c")["id"] == "20261207-152523-run-c3d4"
    with pytest.raises(FrankError, match=r"'20261207-152523-run-' begins 2 runs' ids \(20261207-152523-run-a1b2, "):
        load_run("20261207-152523-run-")
    with pytest.raises(FrankError, match=r"^no fidelity run '2025' \(see `frank fidelity list`\)$"):
        load_run("2025")
