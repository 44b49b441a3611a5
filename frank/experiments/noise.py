"""Where a measure's spread comes from: its variance split into three nested levels (issue 49).

A start's value (time per verify step, say) is taken over R requests of T steps each. Model one step's time as

    x[s, r, t] = mu[g] + w[g, r] + a[s] + b[s, r] + e[s, r, t]

with g the setting (the arms' profile and knobs: an A/A design's two arms are one setting), w[g, r] the
request's own level (its prompt, its context length: the same in every start of the setting, so it is the
workload, not noise), and three noise terms of variances

- step:    e, step to step within a request (sigma2_step);
- request: b, a request against the same request in the setting's other starts, beyond its steps' noise
           (sigma2_request);
- start:   a, start to start within a setting (sigma2_start).

The estimates are the method of moments of a two-way table (starts x requests, within each setting) with
the steps nested in its cells, all on plain numpy:

- sigma2_step    = the pooled variance of the steps within their request (df: steps - requests);
- MS_residual    = the starts x requests interaction of the request values (df: (S_g - 1)(R - 1) summed over the
                   settings), which is sigma2_request + sigma2_step * mean(1/T);
- MS_start       = R x the variance of the starts' mean request values within their setting (df: S_g - 1
                   summed), which is R sigma2_start + MS_residual's expectation.

So sigma2_request = MS_residual - sigma2_step * mean(1/T) and sigma2_start = (MS_start - MS_residual) / R, each
clipped at 0 (the raw estimate is kept: a negative one says the level is below what the data can resolve).
Without step times the request level holds the steps' noise too (`step` is None with the reason). The
shares are given two ways: of one step's variance (sigma2_L / the sum of the three), and of a start value's
variance at n requests of T steps (sigma2_start + sigma2_request / n + sigma2_step / (n T): what the A/A
spread is made of). `spread_pct(n)` turns the latter into the spread `frank experiment plan` takes: the
standard deviation of the difference of two starts, in percent of the mean.

The start value here is the plain mean of the request values; a start's measure (decode seconds over decode
steps) weighs requests by their steps, which the model does not: the report's observed spreads use the
measure itself (frank.experiments.noise_report).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats

LevelName = Literal["step", "request", "start"]
LEVELS: tuple[LevelName, ...] = ("step", "request", "start")
WORDS: dict[LevelName, str] = {
    "step": "step within a request",
    "request": "request within a start",
    "start": "start within a setting",
}


@dataclass(frozen=True)
class Level:
    """One level's variance component, in the measure's units squared (None: not estimable, `note` says why)."""

    name: LevelName
    variance: float | None  # clipped at 0
    raw: float | None  # the moment estimate before clipping
    df: int  # the degrees of freedom of the mean square it rests on
    note: str = ""


@dataclass(frozen=True)
class Decomposition:
    mean: float  # the grand mean of the request values (the unit of every percentage)
    levels: tuple[Level, Level, Level]  # step, request, start
    starts: int
    settings: int
    requests: int  # per start, the same requests in every start
    steps_per_request: float | None  # the harmonic mean of the steps of a request (None: no step times)
    workload_variance: float | None  # of the requests' own means within a setting: the same every start
    ms_start: float | None  # R x the variance of the start means within their setting
    ms_start_df: int
    dropped_requests: tuple[str, ...] = ()  # requests not in every start: left out

    def level(self, name: LevelName) -> Level:
        return self.levels[LEVELS.index(name)]

    def _var(self, name: LevelName) -> float:
        return self.level(name).variance or 0.0

    def sd_pct(self, name: LevelName) -> float | None:
        var = self.level(name).variance
        return None if var is None or not self.mean else 100.0 * math.sqrt(var) / abs(self.mean)

    def shares_of_step(self) -> dict[LevelName, float | None]:
        """Each level's share of one step's variance (None for a level not estimated)."""
        return _shares({name: self.level(name).variance for name in LEVELS})

    def contributions(self, requests: int | None = None) -> dict[LevelName, float | None]:
        """What each level adds to a start value's variance with `requests` requests (default: the data's)."""
        n = requests or self.requests
        inv_t = 1.0 / self.steps_per_request if self.steps_per_request else None
        step = self.level("step").variance
        request = self.level("request").variance
        return {
            "step": None if step is None or inv_t is None else step * inv_t / n,
            "request": None if request is None else request / n,
            "start": self.level("start").variance,
        }

    def shares_of_cell(self, requests: int | None = None) -> dict[LevelName, float | None]:
        return _shares(self.contributions(requests))

    def cell_variance(self, requests: int | None = None) -> float | None:
        """The model's variance of a start value over `requests` requests (None when the start level is not
        estimated)."""
        parts = self.contributions(requests)
        if parts["start"] is None:
            return None
        return sum(v for v in parts.values() if v is not None)

    def spread_pct(self, requests: int | None = None) -> float | None:
        """The model's spread of the difference of two starts (a block effect), in percent of the mean."""
        var = self.cell_variance(requests)
        return None if var is None or not self.mean else 100.0 * math.sqrt(2.0 * var) / abs(self.mean)

    def observed_sd_pct(self) -> float | None:
        """The start values' own standard deviation within their setting (sqrt(MS_start / R)), in percent."""
        if self.ms_start is None or not self.mean:
            return None
        return 100.0 * math.sqrt(self.ms_start / self.requests) / abs(self.mean)

    def observed_sd_ci_pct(self, confidence: float = 0.95) -> tuple[float, float] | None:
        """The start values' standard deviation (MS_start / R) as a chi-square interval, in percent: what the
        data's own between-start spread can be, given how few starts it rests on."""
        if self.ms_start is None or self.ms_start_df < 1 or not self.mean:
            return None
        var = self.ms_start / self.requests
        tail = (1.0 - confidence) / 2.0
        lo = self.ms_start_df * var / float(stats.chi2.ppf(1.0 - tail, self.ms_start_df))
        hi = self.ms_start_df * var / float(stats.chi2.ppf(tail, self.ms_start_df))
        return 100.0 * math.sqrt(lo) / abs(self.mean), 100.0 * math.sqrt(hi) / abs(self.mean)

    def to_json(self) -> dict[str, Any]:
        step_shares, cell_shares = self.shares_of_step(), self.shares_of_cell()
        ci = self.observed_sd_ci_pct()
        return {
            "mean": self.mean,
            "starts": self.starts,
            "settings": self.settings,
            "requests": self.requests,
            "steps_per_request": self.steps_per_request,
            "levels": {
                lv.name: asdict(lv)
                | {
                    "sd_pct": self.sd_pct(lv.name),
                    "share_of_step": step_shares[lv.name],
                    "share_of_cell": cell_shares[lv.name],
                }
                for lv in self.levels
            },
            "workload_sd_pct": None
            if self.workload_variance is None or not self.mean
            else 100.0 * math.sqrt(self.workload_variance) / abs(self.mean),
            "cell_sd_pct": None
            if self.cell_variance() is None or not self.mean
            else 100.0 * math.sqrt(self.cell_variance() or 0.0) / abs(self.mean),
            "observed_cell_sd_pct": self.observed_sd_pct(),
            "spread_pct": self.spread_pct(),
            "observed_cell_sd_ci95_pct": list(ci) if ci is not None else None,
            "dropped_requests": list(self.dropped_requests),
        }


def _shares(parts: Mapping[LevelName, float | None]) -> dict[LevelName, float | None]:
    total = sum(v for v in parts.values() if v is not None)
    return {name: (None if v is None else (v / total if total > 0 else 0.0)) for name, v in parts.items()}


def decompose(
    values: Mapping[str, Mapping[str, float]],
    setting_of: Mapping[str, str],
    steps: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
) -> Decomposition:
    """The three levels of `values` (start -> request -> the request's value), the starts grouped by
    `setting_of` (start -> setting), with each request's step times (start -> request -> steps) where there
    are any. Only requests every start has are used (the others are named in `dropped_requests`)."""
    starts = sorted(values)
    if not starts:
        raise ValueError("no start to decompose")
    common = set.intersection(*(set(values[s]) for s in starts))
    every = set().union(*(set(values[s]) for s in starts))
    requests = sorted(common)
    dropped = tuple(sorted(every - common))
    if not requests:
        raise ValueError("no request is in every start")
    table = np.array([[float(values[s][r]) for r in requests] for s in starts])
    n_req = len(requests)
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(starts):
        groups.setdefault(setting_of[s], []).append(i)

    ss_res = ss_start = ss_work = 0.0
    df_res = df_start = df_work = 0
    for rows in groups.values():
        y = table[rows]
        start_means, request_means, mean = y.mean(axis=1), y.mean(axis=0), y.mean()
        ss_start += n_req * float(np.sum((start_means - mean) ** 2))
        df_start += len(rows) - 1
        ss_work += len(rows) * float(np.sum((request_means - mean) ** 2))
        df_work += n_req - 1
        resid = y - start_means[:, None] - request_means[None, :] + mean
        ss_res += float(np.sum(resid**2))
        df_res += (len(rows) - 1) * (n_req - 1)
    ms_res = ss_res / df_res if df_res else None
    ms_start = ss_start / df_start if df_start else None
    ms_work = ss_work / df_work if df_work else None

    step = _step_level(starts, requests, steps)
    inv_t = step[1]
    step_part = (step[0].variance or 0.0) * (inv_t or 0.0)

    if ms_res is None:
        why = "one request a start" if n_req < 2 else "one start per setting"
        request = Level("request", None, None, 0, f"{why}: the request level cannot be told from the others")
    else:
        raw = ms_res - step_part
        note = "" if step[0].variance is not None else "holds the steps' noise too (no step times)"
        request = Level("request", max(0.0, raw), raw, df_res, note)

    if ms_start is None:
        start = Level("start", None, None, 0, "one start per setting: no start-to-start spread")
    else:
        # without a residual (one request a start) the start level holds the request level too
        raw = (ms_start - (ms_res if ms_res is not None else step_part)) / n_req
        note = "" if ms_res is not None else "holds the request level too (one request a start)"
        start = Level("start", max(0.0, raw), raw, df_start, note)

    workload = None
    if ms_work is not None and ms_res is not None:
        per_start = sum(len(rows) for rows in groups.values()) / len(groups)
        workload = max(0.0, (ms_work - ms_res) / per_start)
    return Decomposition(
        mean=float(table.mean()),
        levels=(step[0], request, start),
        starts=len(starts),
        settings=len(groups),
        requests=n_req,
        steps_per_request=(1.0 / inv_t) if inv_t else None,
        workload_variance=workload,
        ms_start=ms_start,
        ms_start_df=df_start,
        dropped_requests=dropped,
    )


def _step_level(
    starts: Sequence[str], requests: Sequence[str], steps: Mapping[str, Mapping[str, Sequence[float]]] | None
) -> tuple[Level, float | None]:
    """(the step level, the mean of 1/T over the requests with step times)."""
    ss, df, inv = 0.0, 0, []
    for s in starts:
        for r in requests:
            times = (steps or {}).get(s, {}).get(r)
            if times is None or len(times) < 2:
                continue
            x = np.asarray(times, dtype=float)
            ss += float(np.sum((x - x.mean()) ** 2))
            df += len(x) - 1
            inv.append(1.0 / len(x))
    if not df:
        return Level("step", None, None, 0, "no step times recorded (the client could not tell steps apart)"), None
    covered = len(inv)
    total = len(starts) * len(requests)
    note = "" if covered == total else f"from {covered} of {total} requests (the others' steps not told apart)"
    return Level("step", ss / df, ss / df, df, note), float(np.mean(inv))
