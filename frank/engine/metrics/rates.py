"""Rates over a window between two scrapes, for the dashboard (`window_rates`), and a scrape's summary."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from frank.engine import measures
from frank.engine.metrics.names import (
    DECODE,
    E2E,
    GENERATION_TOKENS,
    ITL,
    KV_USAGE,
    LC_PREDICTED,
    LC_PREDICTED_SECONDS,
    LC_PROMPT_SECONDS,
    LC_PROMPT_TOKENS,
    PLUGINS_REFUSED,
    PREFILL,
    PREFIX_HITS,
    PREFIX_QUERIES,
    PROMPT_TOKENS,
    QUEUE,
    RUNNING,
    SPEC_ACCEPTED,
    SPEC_ACCEPTED_PER_POS,
    SPEC_DRAFT_TOKENS,
    SPEC_DRAFTS,
    TTFT,
    WAITING,
)
from frank.engine.metrics.per_request import _counter_delta, _per_position_delta, _reset_reason
from frank.engine.metrics.sample import MetricsSample, not_available


@dataclass(frozen=True)
class WindowRates:
    """Rates and means over the window between two samples (for the dashboard). `valid` False: the window
    spans a restart or an unreachable scrape, and only the gauges of `after` (if any) are set."""

    valid: bool
    reason: str
    window_s: float
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None  # 0..1
    requests_finished: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    prefix_cache_hit_rate: float | None = None  # hits / queries, tokens
    mean_ttft_s: float | None = None
    mean_queue_s: float | None = None
    mean_prefill_s: float | None = None
    mean_front_end_s: float | None = None  # measures.front_end_s of the window's means
    window_verify_step_s: float | None = None  # measures.window_verify_step_s: mean inter-token latency
    mean_acceptance_length: float | None = None  # measures.acceptance_length over the window's drafts
    draft_acceptance_rate: float | None = None  # accepted / draft tokens
    acceptance_per_position: tuple[float, ...] | None = None  # measures.per_position_acceptance, window
    prefill_tokens_per_s: float | None = None  # measures.busy_throughput: prompt tokens computed / prefill s
    decode_tokens_per_s: float | None = None  # measures.busy_throughput: generated tokens / decode seconds
    decode_steps: float | None = None  # verify steps in the window (vLLM: ITL count; llama.cpp: derived)
    not_available: Mapping[str, str] = field(default_factory=dict)  # measure -> why this engine lacks it


def _hist_mean(before: MetricsSample, after: MetricsSample, name: str) -> float | None:
    if not after.has(name):
        return None
    (s0, c0), (s1, c1) = before.hist(name), after.hist(name)
    return measures.ratio(s1 - s0, c1 - c0)


def window_rates(before: MetricsSample, after: MetricsSample) -> WindowRates:
    window = after.taken_at - before.taken_at
    gauges = {"running": after.gauge(RUNNING), "waiting": after.gauge(WAITING), "kv_cache_usage": after.gauge(KV_USAGE)}
    reason = _reset_reason(before, after)
    if reason is None and window <= 0:
        reason = "empty window"
    if reason is not None:
        return WindowRates(
            False,
            reason,
            window,
            running=gauges["running"],
            waiting=gauges["waiting"],
            kv_cache_usage=gauges["kv_cache_usage"],
            not_available=not_available(after),
        )
    ttft, queue, prefill = (_hist_mean(before, after, n) for n in (TTFT, QUEUE, PREFILL))
    drafts = _counter_delta(before, after, SPEC_DRAFTS)
    accepted = _counter_delta(before, after, SPEC_ACCEPTED)
    prompt = _counter_delta(before, after, PROMPT_TOKENS)
    gen = _counter_delta(before, after, GENERATION_TOKENS)
    itl: tuple[float | None, float | None] = (
        (after.hist(ITL)[0] - before.hist(ITL)[0], after.hist(ITL)[1] - before.hist(ITL)[1])
        if after.has(ITL)
        else (None, None)
    )
    if after.kind == "llamacpp":  # no ITL histogram: its decode seconds over the steps its tokens imply
        steps = measures.llamacpp_window_decode_steps(gen, accepted)
        itl = (_counter_delta(before, after, LC_PREDICTED_SECONDS), steps)
    return WindowRates(
        True,
        "ok",
        window,
        **gauges,
        requests_finished=after.hist(E2E)[1] - before.hist(E2E)[1] if after.has(E2E) else None,
        prompt_tokens_per_s=measures.ratio(prompt, window),
        generation_tokens_per_s=measures.ratio(gen, window),
        prefix_cache_hit_rate=measures.ratio(
            _counter_delta(before, after, PREFIX_HITS), _counter_delta(before, after, PREFIX_QUERIES)
        ),
        mean_ttft_s=ttft,
        mean_queue_s=queue,
        mean_prefill_s=prefill,
        mean_front_end_s=measures.front_end_s(ttft, queue, prefill),
        window_verify_step_s=measures.window_verify_step_s(*itl),
        mean_acceptance_length=measures.acceptance_length(accepted, drafts),
        draft_acceptance_rate=measures.draft_acceptance_rate(
            accepted, _counter_delta(before, after, SPEC_DRAFT_TOKENS)
        ),
        acceptance_per_position=measures.per_position_acceptance(_per_position_delta(before, after), drafts),
        **_busy_rates(before, after),
        decode_steps=itl[1],
        not_available=not_available(after),
    )


def _busy_rates(before: MetricsSample, after: MetricsSample | None = None) -> dict[str, float | None]:
    """Tokens per second of prefill and of decode time (not of wall time), over a window (before -> after)
    or, with one sample, over the server's life. vLLM: its prefill/decode histogram sums; llama.cpp: its
    prompt_seconds and tokens_predicted_seconds counters."""

    def d(get: Any, name: str) -> float | None:
        if after is None:
            value: float | None = get(before, name)
            return value
        a, b = get(after, name), get(before, name)
        return None if a is None or b is None else a - b

    def counter(x: MetricsSample, name: str) -> float | None:
        return x.counter(name)

    def hist_sum(x: MetricsSample, name: str) -> float | None:
        return x.hist(name)[0] if x.has(name) else None

    last = after or before
    if last.kind == "llamacpp":
        computed, prefill_s = d(counter, LC_PROMPT_TOKENS), d(counter, LC_PROMPT_SECONDS)
        generated, decode_s = d(counter, LC_PREDICTED), d(counter, LC_PREDICTED_SECONDS)
    else:
        prompt, hits = d(counter, PROMPT_TOKENS), d(counter, PREFIX_HITS)
        computed = None if prompt is None else prompt - (hits or 0.0)
        prefill_s, generated, decode_s = d(hist_sum, PREFILL), d(counter, GENERATION_TOKENS), d(hist_sum, DECODE)
    return {
        "prefill_tokens_per_s": measures.busy_throughput(computed, prefill_s),
        "decode_tokens_per_s": measures.busy_throughput(generated, decode_s),
    }


class SampleSummary(TypedDict, total=False):
    """The headline values of one scrape (`sample_summary`); a failed scrape has only state and error."""

    state: str
    error: str | None
    scrape_s: float
    requests_running: float | None
    requests_waiting: float | None
    kv_cache_usage: float | None
    requests_finished: float | None
    prompt_tokens: float | None
    generation_tokens: float | None
    prefix_cache_hit_rate: float | None
    mean_ttft_s: float | None
    mean_queue_s: float | None
    mean_prefill_s: float | None
    mean_front_end_s: float | None
    window_verify_step_s: float | None
    mean_acceptance_length: float | None
    acceptance_per_position: tuple[float, ...] | None
    spec_decode: bool
    prefill_tokens_per_s: float | None
    decode_tokens_per_s: float | None
    engine_kind: str
    not_available: dict[str, str]
    plugins_refused: float | None
    refused_plugins: list[str]
    plugins_vllm: str | None


def sample_summary(sample: MetricsSample) -> SampleSummary:
    """The headline values of one scrape, as plain JSON: gauges, totals since the server started, and means
    over its whole life (rates over a window come from `window_rates`)."""
    if not sample.ok:
        return SampleSummary(state=sample.state, error=sample.error)

    def mean(name: str) -> float | None:
        return measures.ratio(*sample.hist(name))

    hits, queries = sample.counter(PREFIX_HITS), sample.counter(PREFIX_QUERIES)
    drafts, accepted = sample.counter(SPEC_DRAFTS), sample.counter(SPEC_ACCEPTED)
    ttft, queue, prefill = mean(TTFT), mean(QUEUE), mean(PREFILL)
    busy = _busy_rates(sample)
    return {
        "state": "ok",
        "scrape_s": sample.scrape_s,
        "requests_running": sample.gauge(RUNNING),
        "requests_waiting": sample.gauge(WAITING),
        "kv_cache_usage": sample.gauge(KV_USAGE),
        "requests_finished": sample.hist(E2E)[1] if sample.has(E2E) else None,
        "prompt_tokens": sample.counter(PROMPT_TOKENS),
        "generation_tokens": sample.counter(GENERATION_TOKENS),
        "prefix_cache_hit_rate": measures.ratio(hits, queries),
        "mean_ttft_s": ttft,
        "mean_queue_s": queue,
        "mean_prefill_s": prefill,
        "mean_front_end_s": measures.front_end_s(ttft, queue, prefill),
        "window_verify_step_s": measures.window_verify_step_s(*sample.hist(ITL)) if sample.has(ITL) else None,
        "mean_acceptance_length": measures.acceptance_length(accepted, drafts),
        "acceptance_per_position": measures.per_position_acceptance(sample.per_position(SPEC_ACCEPTED_PER_POS), drafts),
        "spec_decode": sample.has(SPEC_DRAFTS),
        "prefill_tokens_per_s": busy["prefill_tokens_per_s"],
        "decode_tokens_per_s": busy["decode_tokens_per_s"],
        "engine_kind": sample.kind,
        "not_available": not_available(sample),
        "plugins_refused": sample.gauge(PLUGINS_REFUSED),
        "refused_plugins": list(sample.refused_plugins()),
        "plugins_vllm": sample.plugins_vllm() or None,
    }
