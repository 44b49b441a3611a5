"""The fidelity measure, defined once (docs/fidelity.md): KL(P_ref || Q) over the reference's top k with the
remaining mass as one tail bucket on each side, averaged over positions.

At one position the reference gives its top-k tokens S with log-probabilities log p_i (normalized over the
whole vocabulary). The candidate gives log q_j for the tokens it returned: every engine kind gives its own
top k (frank.fidelity.candidate), so a token of S may be missing. The buckets are the same on both sides:

    B = { i in S : the candidate returned i }           one bucket per token
    tail = everything else (the vocabulary minus B)      p_tail = 1 - sum_B p_i,  q_tail = 1 - sum_B q_i

    KL_t = sum_{i in B} p_i (log p_i - log q_i) + p_tail (log p_tail - log q_tail)

A reference token the candidate did not return joins the tail on BOTH sides, so both sides stay
distributions over the same buckets and KL_t >= 0 (the KL of a coarser partition is a lower bound of the
KL of a finer one: a miss can hide divergence, never invent it). Misses are counted and reported next to
the KL. The set's KL is the mean of KL_t over all its scored positions. Pure: numpy and the standard
library only (it is also imported inside the engine venv).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

TOP_K = 64


@dataclass(frozen=True)
class PositionKL:
    kl: float
    misses: int  # reference top-k tokens the candidate did not return (merged into the tail)


def _log1mexp(log_mass: float) -> float:
    """log(1 - exp(x)) for x <= 0, accurate near both ends; -inf when the mass is (rounded to) 1."""
    if log_mass >= 0.0:
        return float("-inf")
    if log_mass > -0.6931471805599453:  # x > -ln 2
        return float(np.log(-np.expm1(log_mass)))
    return float(np.log1p(-np.exp(log_mass)))


def _logsumexp(values: np.ndarray) -> float:
    if values.size == 0:
        return float("-inf")
    top = float(values.max())
    return top + float(np.log(np.exp(values - top).sum()))


def position_kl(ref_ids: Sequence[int], ref_logprobs: Sequence[float], cand: Mapping[int, float]) -> PositionKL:
    """KL_t for one position. `ref_ids`/`ref_logprobs`: the reference's top k (natural-log probabilities over
    the whole vocabulary); `cand`: token id -> the candidate's log-probability for every token it returned."""
    ids = list(ref_ids)
    p_log = np.asarray(ref_logprobs, dtype=np.float64)
    if len(ids) != p_log.size:
        raise ValueError(f"{len(ids)} reference ids but {p_log.size} log-probabilities")
    known = np.array([i in cand for i in ids], dtype=bool)
    p_b = p_log[known]
    q_b = np.array([cand[i] for i, k in zip(ids, known) if k], dtype=np.float64)
    # a float32 log-softmax can round its largest entry a hair above 0: a probability is at most 1
    p_b, q_b = np.minimum(p_b, 0.0), np.minimum(q_b, 0.0)
    kl = float(np.sum(np.exp(p_b) * (p_b - q_b)))
    p_tail_log = _log1mexp(_logsumexp(p_b))
    q_tail_log = _log1mexp(_logsumexp(q_b))
    if p_tail_log != float("-inf"):
        # the candidate put (numerically) all its mass on B while the reference did not: clamp at float64's
        # smallest tail instead of an infinite KL, so one rounding case cannot swamp a set's mean
        q_tail_log = max(q_tail_log, np.log(np.finfo(np.float64).tiny))
        kl += float(np.exp(p_tail_log) * (p_tail_log - q_tail_log))
    return PositionKL(kl=max(kl, 0.0), misses=int((~known).sum()))


@dataclass(frozen=True)
class SetKL:
    kl: float  # mean KL_t over positions
    positions: int
    misses: int  # sum over positions
    max_kl: float  # the worst position


def mean_kl(ref_ids: np.ndarray, ref_logprobs: np.ndarray, cand: Sequence[Mapping[int, float]]) -> SetKL:
    """The set's KL: `ref_ids`/`ref_logprobs` are [positions, k] arrays; `cand` one mapping per position."""
    if len(cand) != len(ref_ids):
        raise ValueError(f"{len(ref_ids)} reference positions but {len(cand)} candidate positions")
    if len(cand) == 0:
        raise ValueError("no positions to compare")
    per = [position_kl(ids, lps, c) for ids, lps, c in zip(ref_ids.tolist(), ref_logprobs, cand)]
    kls = np.array([p.kl for p in per], dtype=np.float64)
    return SetKL(kl=float(kls.mean()), positions=len(per), misses=sum(p.misses for p in per), max_kl=float(kls.max()))


def dense_candidate(ids: np.ndarray, logprobs: np.ndarray) -> list[dict[int, float]]:
    """A reference-shaped top-k ([positions, k] arrays) as candidate mappings: reference vs reference."""
    return [dict(zip(row_ids, row_lps)) for row_ids, row_lps in zip(ids.tolist(), logprobs.tolist())]
