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

A window average over the dashboard's scrapes has its own name (`window_verify_step_s`): it counts every
decode step that ended in the window, including steps of requests still running, so it is not the time per
verify step of any set of finished requests.
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any


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


def verify_step_totals(servers: Iterable[Mapping[str, Any]]) -> tuple[float, float]:
    """(decode seconds, decode steps) summed over per-request server values (replay records' `server`).
    Requests without a decode-step count are left out of both sums, so the ratio stays one of matching
    halves."""
    decode = steps = 0.0
    for server in servers:
        n = server.get("decode_steps")
        if n:
            steps += n
            decode += server.get("decode_s") or 0.0
    return decode, steps


def records_time_per_verify_step(servers: Iterable[Mapping[str, Any]]) -> float | None:
    """Time per verify step over many requests: their decode seconds / their decode steps."""
    return time_per_verify_step(*verify_step_totals(servers))


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
