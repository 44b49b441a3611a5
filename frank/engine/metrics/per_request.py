"""The values of ONE request: from two scrapes around it (`request_delta`: with one request in flight, the
change of a histogram's `_sum` is that request's value when its `_count` rose by exactly 1), else from the
response's own metrics (`response_values`) or llama.cpp's `timings` (`timings_values`), each value with its
source. A server that restarted gives deltas that say so instead of negative numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from frank.engine import measures
from frank.engine.metrics.names import (
    _MONOTONIC,
    _PER_REQUEST_HISTOGRAMS,
    DECODE,
    E2E,
    GENERATION_TOKENS,
    INFERENCE,
    ITL,
    PREFILL,
    PREFIX_HITS,
    PROMPT_TOKENS,
    QUEUE,
    REQ_GENERATION_TOKENS,
    REQ_PROMPT_TOKENS,
    SPEC_ACCEPTED,
    SPEC_ACCEPTED_PER_POS,
    SPEC_DRAFT_TOKENS,
    SPEC_DRAFTS,
    TTFT,
)
from frank.engine.metrics.sample import MetricsSample


def _reset_reason(before: MetricsSample, after: MetricsSample) -> str | None:
    """Why deltas between the two would be meaningless, or None."""
    if not before.ok or not after.ok:
        bad = before if not before.ok else after
        return f"{bad.state}: {bad.error}"
    for name in _MONOTONIC:
        b, a = before.counter(name), after.counter(name)
        if b is not None and a is not None and a < b:
            return f"counter reset ({name} went from {b:g} to {a:g}: server restarted)"
    for name in (*_PER_REQUEST_HISTOGRAMS, ITL):
        if after.hist(name)[1] < before.hist(name)[1]:
            return f"counter reset ({name}_count went down: server restarted)"
    return None


def _counter_delta(before: MetricsSample, after: MetricsSample, name: str) -> float | None:
    b, a = before.counter(name), after.counter(name)
    return None if b is None or a is None else a - b


def _per_position_delta(before: MetricsSample, after: MetricsSample) -> tuple[float, ...] | None:
    a = after.per_position(SPEC_ACCEPTED_PER_POS)
    if not a:
        return None
    b = before.per_position(SPEC_ACCEPTED_PER_POS)
    return tuple(x - (b[i] if i < len(b) else 0.0) for i, x in enumerate(a))


@dataclass(frozen=True)
class RequestDelta:
    """Server-side values of ONE request, from two scrapes around it (None: not measured or not present).
    The measures are frank.engine.measures' (docs/measures.md)."""

    attributed: bool
    reason: str
    ttft_s: float | None = None
    queue_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    inference_s: float | None = None
    e2e_s: float | None = None
    front_end_s: float | None = None  # measures.front_end_s: ttft - queue - prefill
    drafted_steps: float | None = None  # delta spec_decode_num_drafts: DRAFTED steps only
    verify_step_s: float | None = None  # measures.time_per_verify_step: decode time / decode steps
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    acceptance_length: float | None = None  # measures.acceptance_length: 1 + accepted / drafts
    acceptance_per_position: tuple[float, ...] | None = None  # measures.per_position_acceptance
    decode_steps: float | None = None  # delta inter_token_latency count: every verify step, drafted or not
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    cached_tokens: float | None = None  # prefix-cache hits (tokens)


def request_delta(before: MetricsSample, after: MetricsSample) -> RequestDelta:
    reason = _reset_reason(before, after)
    if reason is not None:
        return RequestDelta(False, reason)
    counts = {name: after.hist(name)[1] - before.hist(name)[1] for name in _PER_REQUEST_HISTOGRAMS if after.has(name)}
    if after.kind == "llamacpp":
        return RequestDelta(False, "llama.cpp's /metrics has no per-request histograms (its response has timings)")
    if E2E not in counts:
        return RequestDelta(False, f"no {E2E} in /metrics")
    off = {name: c for name, c in counts.items() if c != 1}
    if off:
        name, c = next(iter(off.items()))
        what = "no request finished" if c == 0 else f"{c:g} requests finished"
        return RequestDelta(False, f"{what} between the scrapes ({name}_count rose by {c:g}, not 1)")

    def d(name: str) -> float | None:
        return after.hist(name)[0] - before.hist(name)[0] if name in counts else None

    ttft, queue, prefill, decode = d(TTFT), d(QUEUE), d(PREFILL), d(DECODE)
    drafts = _counter_delta(before, after, SPEC_DRAFTS)
    accepted = _counter_delta(before, after, SPEC_ACCEPTED)

    def hsum(name: str) -> float | None:
        return after.hist(name)[0] - before.hist(name)[0] if after.has(name) else None

    prompt = hsum(REQ_PROMPT_TOKENS)
    gen = hsum(REQ_GENERATION_TOKENS)
    itl_count = after.hist(ITL)[1] - before.hist(ITL)[1] if after.has(ITL) else None
    return RequestDelta(
        attributed=True,
        reason="one request finished between the scrapes",
        ttft_s=ttft,
        queue_s=queue,
        prefill_s=prefill,
        decode_s=decode,
        inference_s=d(INFERENCE),
        e2e_s=d(E2E),
        front_end_s=measures.front_end_s(ttft, queue, prefill),
        drafted_steps=drafts,
        verify_step_s=measures.time_per_verify_step(decode, itl_count),
        draft_tokens=_counter_delta(before, after, SPEC_DRAFT_TOKENS),
        accepted_tokens=accepted,
        acceptance_length=measures.acceptance_length(accepted, drafts),
        acceptance_per_position=measures.per_position_acceptance(_per_position_delta(before, after), drafts),
        decode_steps=itl_count,
        prompt_tokens=prompt if prompt is not None else _counter_delta(before, after, PROMPT_TOKENS),
        generation_tokens=gen if gen is not None else _counter_delta(before, after, GENERATION_TOKENS),
        cached_tokens=_counter_delta(before, after, PREFIX_HITS),
    )


# Where a per-request value came from (a replay record's server["sources"]).
SOURCE_DELTA = "metrics-delta"  # /metrics deltas around the request (request_delta)
SOURCE_RESPONSE = "response"  # the response's own `metrics` (--enable-per-request-metrics)
SOURCE_DERIVED = "response-derived"  # computed from response values (decode steps: see response_values)
SOURCE_CLIENT = "client+response"  # the client's TTFT with the response's queue and prefill
SOURCE_TIMINGS = "llamacpp-timings"  # llama.cpp's `timings` object in its response
SOURCE_CLIENT_ONLY = "client"  # timed on the client


def spec_drafts_delta(before: MetricsSample, after: MetricsSample) -> float | None:
    """Drafted verify steps between two scrapes (spec_decode_num_drafts; llama.cpp's counter maps to it)."""
    return _counter_delta(before, after, SPEC_DRAFTS)


def timings_values(
    timings: Mapping[str, Any] | None,
    client_ttft_s: float | None,
    drafted_steps: float | None = None,
    drafted_unknown: str = "",
) -> tuple[RequestDelta, dict[str, str]] | None:
    """A request's server values from the `timings` object llama.cpp puts in its response (the last chunk
    when streamed): prompt_n tokens computed in prompt_ms, cache_n reused from the cache, predicted_n tokens
    generated in predicted_ms (after the prompt's step), draft_n proposed and draft_n_accepted accepted draft
    tokens. Decode steps are derived as for vLLM's response (generated - 1 - accepted). llama.cpp reports no
    queue time, so front-end time (TTFT - queue - prefill) is not available; the drafted-step count is not
    in the timings either: `drafted_steps` (the change of llamacpp:spec_decode_num_drafts_total around a
    request that ran alone, `spec_drafts_delta`) supplies it, and `drafted_unknown` says why it is None."""
    if not timings or timings.get("prompt_ms") is None:
        return None
    prefill = float(timings["prompt_ms"]) / 1000.0
    decode = None if timings.get("predicted_ms") is None else float(timings["predicted_ms"]) / 1000.0
    generated = timings.get("predicted_n")
    accepted = timings.get("draft_n_accepted")
    steps = measures.llamacpp_decode_steps(generated, accepted)
    cached = timings.get("cache_n")
    values = RequestDelta(
        attributed=True,
        reason="from llama.cpp's response timings"
        + (f"; drafted steps unknown: {drafted_unknown}" if drafted_steps is None and drafted_unknown else ""),
        ttft_s=client_ttft_s,
        prefill_s=prefill,
        decode_s=decode,
        inference_s=None if decode is None else prefill + decode,
        verify_step_s=measures.time_per_verify_step(decode, steps),
        drafted_steps=drafted_steps,
        acceptance_length=measures.acceptance_length(accepted, drafted_steps),
        draft_tokens=None if timings.get("draft_n") is None else float(timings["draft_n"]),
        accepted_tokens=None if accepted is None else float(accepted),
        decode_steps=steps,
        prompt_tokens=float(timings.get("prompt_n", 0) + (cached or 0)),
        generation_tokens=None if generated is None else float(generated),
        cached_tokens=None if cached is None else float(cached),
    )
    sources = {
        k: SOURCE_TIMINGS for k, v in values.__dict__.items() if v is not None and k not in ("attributed", "reason")
    }
    sources.update(inference_s=SOURCE_DERIVED, decode_steps=SOURCE_DERIVED, verify_step_s=SOURCE_DERIVED)
    sources.update(drafted_steps=SOURCE_DELTA, acceptance_length=SOURCE_DELTA)
    if client_ttft_s is not None:
        sources["ttft_s"] = SOURCE_CLIENT_ONLY
    return values, {k: v for k, v in sources.items() if getattr(values, k) is not None}


def response_values(
    metrics: Mapping[str, Any] | None,
    completion_tokens: int | None,
    prompt_tokens: int | None,
    client_ttft_s: float | None,
    reason: str = "",
) -> tuple[RequestDelta, dict[str, str]] | None:
    """A request's server values from the `metrics` object vLLM 0.32 puts in its response (the usage chunk
    when streamed) with --enable-per-request-metrics [--per-request-spec-decode-metrics summary]
    (vllm/entrypoints/generate/base/serving.py build_per_request_timing_metrics), and the source of each.

    vLLM's `time_to_first_token_ms` there is SCHEDULED -> first token, i.e. the prefill time of the
    /metrics histograms, not a TTFT from arrival; `generation_time_ms` is the decode time; `mean_itl_ms`
    is per output token. The response has no decode-step count: it is derived as output tokens - 1 -
    accepted draft tokens (each step gives 1 + accepted tokens), which undercounts when the last step's
    accepted tokens were cut at a stop or max_tokens. Front-end time uses the client's TTFT (network and
    client included). None when the response carried no timings."""
    if not metrics or metrics.get("generation_time_ms") is None:
        return None

    def sec(key: str) -> float | None:
        v = metrics.get(key)
        return None if v is None else float(v) / 1000.0

    queue, prefill, decode = sec("queue_time_ms"), sec("time_to_first_token_ms"), sec("generation_time_ms")
    spec = metrics.get("speculative_decoding") or {}
    drafts = spec.get("num_spec_steps")
    accepted = spec.get("num_accepted_draft_tokens")
    hist = spec.get("acceptance_histogram") or []
    per_pos = [float(sum(hist[i + 1 :])) for i in range(len(hist) - 1)] if hist else None
    steps = None
    if completion_tokens is not None and (accepted is not None or not spec):
        steps = float(max(completion_tokens - 1 - (accepted or 0), 0))
    sources = {
        "queue_s": SOURCE_RESPONSE,
        "prefill_s": SOURCE_RESPONSE,
        "decode_s": SOURCE_RESPONSE,
        "inference_s": SOURCE_DERIVED,
        "generation_tokens": SOURCE_RESPONSE,
        "prompt_tokens": SOURCE_RESPONSE,
    }
    if spec:
        sources.update(
            drafted_steps=SOURCE_RESPONSE,
            draft_tokens=SOURCE_RESPONSE,
            accepted_tokens=SOURCE_RESPONSE,
            acceptance_length=SOURCE_DERIVED,
            acceptance_per_position=SOURCE_DERIVED,
        )
    if steps is not None:
        sources.update(decode_steps=SOURCE_DERIVED, verify_step_s=SOURCE_DERIVED)
    if client_ttft_s is not None:
        sources.update(ttft_s=SOURCE_CLIENT, front_end_s=SOURCE_CLIENT)
    values = RequestDelta(
        attributed=True,
        reason=f"from the response's own metrics ({reason})" if reason else "from the response's own metrics",
        ttft_s=client_ttft_s,
        queue_s=queue,
        prefill_s=prefill,
        decode_s=decode,
        inference_s=None if prefill is None or decode is None else prefill + decode,
        front_end_s=measures.front_end_s(client_ttft_s, queue, prefill),
        drafted_steps=None if drafts is None else float(drafts),
        verify_step_s=measures.time_per_verify_step(decode, steps),
        draft_tokens=None if spec.get("num_draft_tokens") is None else float(spec["num_draft_tokens"]),
        accepted_tokens=None if accepted is None else float(accepted),
        acceptance_length=measures.acceptance_length(accepted, drafts),
        acceptance_per_position=measures.per_position_acceptance(per_pos, drafts),
        decode_steps=steps,
        prompt_tokens=None if prompt_tokens is None else float(prompt_tokens),
        generation_tokens=None if completion_tokens is None else float(completion_tokens),
    )
    return values, sources


def delta_sources(delta: RequestDelta) -> dict[str, str]:
    """Every value an attributed delta has came from /metrics."""
    skip = ("attributed", "reason")
    return (
        {k: SOURCE_DELTA for k, v in delta.__dict__.items() if k not in skip and v is not None}
        if delta.attributed
        else {}
    )
