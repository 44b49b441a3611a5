"""The project's measures, one definition each (docs/measures.md explains every formula and series).

Every other module (frank.engine.metrics, frank.workloads.replay, frank.experiments.cell, the console) computes a measure
by calling one of these functions; none writes the arithmetic again. Inputs are plain numbers taken from
vLLM 0.32's series, either the deltas of ONE request or sums over many:

- front-end time: TTFT - queue - prefill (`vllm:time_to_first_token_seconds`, `request_queue_time_seconds`,
  `request_prefill_time_seconds`): what happens before the engine core queues the request (chat template,
  tokenization, the API server) plus output handling of the first token.
- time per verify step: decode time / decode steps. A decode step is one engine step that gave the request
  tokens after its first one: one pass of the target model over the request's draft tokens, however many
  (vLLM observes `vllm:inter_token_latency_seconds` once per such step, so the decode steps are that
  histogram's `_count` delta, and `request_decode_time_seconds` is exactly the sum of those observations).
  With ngram drafting a step whose n-gram lookup found nothing verifies zero draft tokens: it is still one
  pass of the target model and counts as a verify step; `vllm:spec_decode_num_drafts` does NOT count it.
- acceptance length: 1 + accepted draft tokens / drafts (vLLM's convention: the bonus token included;
  per DRAFTED step, so steps without a draft are left out of it).
- per-position acceptance: accepted tokens at draft position i / drafts
  (`vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}`).

- llama.cpp's decode steps: predicted_n - 1 - draft_n_accepted from a response's `timings`: every verify
  step yields its accepted drafts plus one token, and the first token comes from the prompt's step.
- CPU-expert decode wait: the mean CPU seconds of llama.cpp's pool workers between a request's first token
  and its last (frank.telemetry.expert_pool reads them): with the pool asleep when idle, the time a verify
  step spends computing CPU-resident experts; per verify step, that over the decode steps.

- a request's step times: the gaps between the streamed events that carried its output, grouped into the
  server's decode steps (the client's clock: the HTTP path is in them); their median is the `median`
  aggregate of time per verify step, which a stalled step moves by one rank instead of by its length.

A window average over the dashboard's scrapes has its own name (`window_verify_step_s`): it counts every
decode step that ended in the window, including steps of requests still running, so it is not the time per
verify step of any set of finished requests.
"""  # noqa: E501

from __future__ import annotations

import statistics
from collections.abc import Sequence


def ratio(num: float | None, den: float | None) -> float | None:
    """num / den; None when either is missing or den is 0."""
    return None if num is None or den is None or den == 0 else num / den


def busy_throughput(tokens: float | None, busy_s: float | None) -> float | None:
    """Tokens per second of the engine's own prefill (or decode) time, not of wall time: prompt tokens
    computed (cache hits left out) / prefill seconds, or generated tokens / decode seconds."""
    return ratio(tokens, busy_s)


def front_end_s(ttft_s: float | None, queue_s: float | None, prefill_s: float | None) -> float | None:
    """TTFT - queue - prefill (None when one of them is missing). With means over a window it is the mean
    front-end time of the requests whose first token came in the window."""
    if ttft_s is None or queue_s is None or prefill_s is None:
        return None
    return ttft_s - queue_s - prefill_s


def time_per_verify_step(decode_s: float | None, decode_steps: float | None) -> float | None:
    """Seconds of decode per verify step: decode time / decode steps (inter-token-latency observations),
    every target-model pass after the first token counted once, drafted or not."""
    return ratio(decode_s, decode_steps)


# A gap shorter than this share of the request's mean step (the server's decode time over its decode steps)
# is no step the client timed: one step's tokens arriving one by one (llama.cpp sends each token as an
# event), or events an API server that fell behind sent in a burst.
MIN_STEP_SHARE = 0.2
# Up to this share of a request's steps may be hidden in the gap after them (their output came with the next
# step's: a character split over tokens waits for its end, or a burst); with more, its steps are not known.
HIDDEN_STEPS_SHARE = 0.10


def step_times(
    output_at_s: Sequence[float] | None, decode_steps: float | None, decode_s: float | None = None
) -> tuple[float, ...] | None:
    """One request's verify steps as the client saw them, from when each streamed event with output arrived.

    Events the client read at once (the same arrival time) count as one arrival, and with the server's decode
    time a gap under MIN_STEP_SHARE of the request's mean step is no step (a burst). With the server's count
    of decode steps D: when the client saw at least D gaps that can be steps after the first token, the D
    widest are the steps' boundaries and a step runs from the first event of the step before to its own first
    event. With fewer, some steps' output came with the next step's (llama.cpp and exllamav3 hold back a
    character split over tokens; an API server or a client that fell behind sends or reads them in a burst),
    so a gap holds two steps: when at most HIDDEN_STEPS_SHARE of the D steps are hidden so, that many of the
    longest step times are left out (the ones that can hold two); with more, or no decode step, None: the
    steps cannot be told apart. Without D every gap is a step."""
    if not output_at_s or len(output_at_s) < 2:
        return None
    arrivals = [t for i, t in enumerate(output_at_s) if i == 0 or t != output_at_s[i - 1]]
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    if decode_steps is None:
        return tuple(gaps) or None
    steps = int(decode_steps)
    if steps < 1:
        return None
    shortest = MIN_STEP_SHARE * decode_s / steps if decode_s else 0.0
    candidates = [i for i, g in enumerate(gaps) if g >= shortest and g > 0]
    hidden = max(0, steps - len(candidates))
    if hidden > HIDDEN_STEPS_SHARE * steps:
        return None
    bounds = sorted(sorted(candidates, key=lambda i: gaps[i], reverse=True)[:steps])  # the widest, in order
    firsts = [arrivals[0]] + [arrivals[i + 1] for i in bounds]
    times = [b - a for a, b in zip(firsts, firsts[1:])]
    if hidden:
        longest = set(sorted(range(len(times)), key=lambda i: times[i], reverse=True)[:hidden])
        times = [t for i, t in enumerate(times) if i not in longest]
    return tuple(times)


def median_step_s(steps: Sequence[float] | None) -> float | None:
    """The median of verify steps' times (the `median` aggregate of time per verify step): a step that
    stalls (a page fault, a preempted thread) moves it by one rank, where it moves the mean by its length."""
    return statistics.median(steps) if steps else None


def window_verify_step_s(itl_sum_s: float | None, itl_count: float | None) -> float | None:
    """The window average: sum / count of `vllm:inter_token_latency_seconds` observed between two scrapes
    (every request's decode steps that ended in the window, finished or not)."""
    return ratio(itl_sum_s, itl_count)


def acceptance_length(accepted_tokens: float | None, drafts: float | None) -> float | None:
    """1 + accepted / drafts: tokens a drafted step yields on average (vLLM's mean acceptance length)."""
    per_draft = ratio(accepted_tokens, drafts)
    return None if per_draft is None else 1.0 + per_draft


def draft_acceptance_rate(accepted_tokens: float | None, draft_tokens: float | None) -> float | None:
    """accepted / proposed draft tokens (0..1)."""
    return ratio(accepted_tokens, draft_tokens)


def per_position_acceptance(accepted_per_pos: Sequence[float] | None, drafts: float | None) -> tuple[float, ...] | None:
    """accepted at position i / drafts, for each draft position i (0-based): the share of drafted steps
    that accepted at least i + 1 tokens. None without drafts."""
    if not accepted_per_pos or not drafts:
        return None
    return tuple(a / drafts for a in accepted_per_pos)


def llamacpp_decode_steps(predicted_n: float | None, accepted: float | None) -> float | None:
    """Verify steps of one llama.cpp response (its `timings`): predicted_n - 1 - draft_n_accepted. Each step
    yields its accepted drafts plus one token; the first token is sampled from the prompt's step."""
    if predicted_n is None:
        return None
    return float(max(predicted_n - 1 - (accepted or 0), 0))


def cpu_expert_wait_s(worker_cpu_s: Sequence[float] | None) -> float | None:
    """One request's CPU-expert decode wait: the mean over llama.cpp's pool workers of the CPU seconds each
    spent between the request's first token and its last. The workers only compute CPU ops, split evenly
    among the pool's threads, and sleep when idle (the profiles' --poll 0 / OMP_WAIT_POLICY=PASSIVE), so
    one worker's CPU time is the wall time the pool computed. None without workers (a pool of one)."""
    if not worker_cpu_s:
        return None
    return sum(worker_cpu_s) / len(worker_cpu_s)


def cpu_expert_wait_per_step(wait_s: float | None, decode_steps: float | None) -> float | None:
    """The CPU-expert decode wait per verify step: the request's wait / its decode steps."""
    return ratio(wait_s, decode_steps)


def llamacpp_window_decode_steps(generated: float | None, accepted: float | None) -> float | None:
    """llama.cpp's verify steps between two scrapes: generated tokens - accepted drafts (a step yields its
    accepted drafts plus one token). The first token of each request (sampled from its prompt's step) is
    counted as a step too: an overcount of one per request that started in the window."""
    if generated is None:
        return None
    return max(generated - (accepted or 0.0), 0.0)


def window_cpu_expert_wait_s(
    workers_busy_pct: float | None, window_s: float | None, decode_steps: float | None
) -> float | None:
    """The dashboard's CPU-expert wait per verify step: the pool workers' mean busy share over the window x
    the window / the verify steps in it (a window also holds prefill, which the per-request wait leaves out)."""
    if workers_busy_pct is None or window_s is None:
        return None
    return ratio(workers_busy_pct / 100.0 * window_s, decode_steps)
