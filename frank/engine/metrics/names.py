"""Metric family names: vLLM 0.32's (vllm/v1/metrics/loggers.py, vllm/v1/spec_decode/metrics.py), llama.cpp's
`llamacpp:*` counters and frank's plugins' own, the families a scrape keeps, and which series only go up.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# Histograms (seconds) of one finished request, all recorded in the same engine step.
TTFT = "vllm:time_to_first_token_seconds"
QUEUE = "vllm:request_queue_time_seconds"
PREFILL = "vllm:request_prefill_time_seconds"
DECODE = "vllm:request_decode_time_seconds"
INFERENCE = "vllm:request_inference_time_seconds"
E2E = "vllm:e2e_request_latency_seconds"
ITL = "vllm:inter_token_latency_seconds"  # one observation per engine step per request (= one verify step)
REQ_PROMPT_TOKENS = "vllm:request_prompt_tokens"
REQ_GENERATION_TOKENS = "vllm:request_generation_tokens"
# Counters (the exposition adds `_total`; names here are without it).
PROMPT_TOKENS = "vllm:prompt_tokens"
GENERATION_TOKENS = "vllm:generation_tokens"
PREFIX_QUERIES = "vllm:prefix_cache_queries"
PREFIX_HITS = "vllm:prefix_cache_hits"
REQUEST_SUCCESS = "vllm:request_success"
SPEC_DRAFTS = "vllm:spec_decode_num_drafts"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
SPEC_ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"  # one series per `position` label
# Gauges.
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = "vllm:kv_cache_usage_perc"
# frank's vLLM plugins (frank/plugins/compat.py): each part's verdict on the vLLM it loaded into, and how many
# stay off because vLLM's internals differ from the versions they were verified on.
PLUGIN_COMPATIBLE = "frank:plugin_compatible"  # one series per part: {part, vllm} 1 or 0
PLUGINS_REFUSED = "frank:plugins_refused"

# llama.cpp's server (tools/server: server-context.cpp), counters without `_total`.
LC_PROMPT_TOKENS = "llamacpp:prompt_tokens"  # processed, EXCLUDING tokens reused from the cache
LC_PROMPT_CACHED = "llamacpp:prompt_tokens_cached"
LC_PROMPT_SECONDS = "llamacpp:prompt_seconds"
LC_PREDICTED = "llamacpp:tokens_predicted"
LC_PREDICTED_SECONDS = "llamacpp:tokens_predicted_seconds"
LC_DECODES = "llamacpp:n_decode"  # llama_decode() calls, speculative verification passes left out
LC_SPEC_DRAFTS = "llamacpp:spec_decode_num_drafts"
LC_SPEC_DRAFT_TOKENS = "llamacpp:spec_decode_num_draft_tokens"
LC_SPEC_ACCEPTED = "llamacpp:spec_decode_num_accepted_tokens"
LC_PROCESSING = "llamacpp:requests_processing"
LC_DEFERRED = "llamacpp:requests_deferred"
LLAMACPP_FAMILIES = frozenset(
    {
        LC_PROMPT_TOKENS,
        LC_PROMPT_CACHED,
        LC_PROMPT_SECONDS,
        LC_PREDICTED,
        LC_PREDICTED_SECONDS,
        LC_DECODES,
        LC_SPEC_DRAFTS,
        LC_SPEC_DRAFT_TOKENS,
        LC_SPEC_ACCEPTED,
        LC_PROCESSING,
        LC_DEFERRED,
    }
)
# Measures llama.cpp's /metrics cannot give, and why (shown instead of a value, never as 0).
LLAMACPP_NOT_EXPORTED: Mapping[str, str] = MappingProxyType(
    {
        "mean_ttft_s": "llama.cpp's /metrics has no time-to-first-token histogram (replays time TTFT on the client)",
        "mean_queue_s": "llama.cpp's /metrics has no queue-time histogram",
        "mean_prefill_s": "llama.cpp's /metrics counts no finished requests, so no per-request mean",
        "mean_front_end_s": "needs per-request TTFT, queue and prefill times, which llama.cpp's /metrics lacks",
        "requests_finished": "llama.cpp's /metrics counts no finished requests",
        "kv_cache_usage": "llama.cpp's /metrics has no KV-cache usage gauge",
        "acceptance_per_position": "llama.cpp's /metrics has no per-position acceptance counters",
    }
)

# What parse_metrics keeps by default. The prometheus_client parser costs ~30 us a line here and vLLM's
# /metrics has ~670 lines (312 of them histogram buckets we never use), so lines of other families, buckets
# and `_created` series are dropped before parsing: 9.6 ms -> ~2 ms per scrape on this 2-core box.
DEFAULT_FAMILIES = frozenset(
    {
        TTFT,
        QUEUE,
        PREFILL,
        DECODE,
        INFERENCE,
        E2E,
        ITL,
        REQ_PROMPT_TOKENS,
        REQ_GENERATION_TOKENS,
        PROMPT_TOKENS,
        GENERATION_TOKENS,
        PREFIX_QUERIES,
        PREFIX_HITS,
        REQUEST_SUCCESS,
        SPEC_DRAFTS,
        SPEC_DRAFT_TOKENS,
        SPEC_ACCEPTED,
        SPEC_ACCEPTED_PER_POS,
        RUNNING,
        WAITING,
        KV_USAGE,
        "vllm:prompt_tokens_cached",
        "vllm:num_preemptions",
        PLUGIN_COMPATIBLE,
        PLUGINS_REFUSED,
        "vllm:request_time_per_output_token_seconds",
        *LLAMACPP_FAMILIES,
    }
)
_SAMPLE_SUFFIXES = ("_sum", "_count", "_total")

# Histograms whose _count must rise by exactly one for a delta to belong to one request.
_PER_REQUEST_HISTOGRAMS = (TTFT, QUEUE, PREFILL, DECODE, INFERENCE, E2E)
# Counters and histogram counts that only go up while the server lives: any decrease means a restart.
_MONOTONIC = (
    PROMPT_TOKENS,
    GENERATION_TOKENS,
    PREFIX_QUERIES,
    PREFIX_HITS,
    SPEC_DRAFTS,
    SPEC_DRAFT_TOKENS,
    SPEC_ACCEPTED,
)
