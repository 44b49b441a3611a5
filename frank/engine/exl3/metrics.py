"""The adapter's Prometheus families, named as vLLM 0.32 names them: frank's metrics layer reads those names
(frank/engine/metrics/names.py; tests/unit/test_exl3_adapter.py checks the two agree), so an exllamav3
engine's requests give the same per-request deltas and dashboard rates as a vLLM one. Every family carries
vLLM's `model_name` label."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from frank.engine.exl3.generator import Finished

# vLLM's names, without the suffixes prometheus_client adds (_total, _sum, _count, _bucket)
NAMES = {
    "ttft": "vllm:time_to_first_token_seconds",
    "queue": "vllm:request_queue_time_seconds",
    "prefill": "vllm:request_prefill_time_seconds",
    "decode": "vllm:request_decode_time_seconds",
    "inference": "vllm:request_inference_time_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "req_prompt_tokens": "vllm:request_prompt_tokens",
    "req_generation_tokens": "vllm:request_generation_tokens",
    "prompt_tokens": "vllm:prompt_tokens",
    "generation_tokens": "vllm:generation_tokens",
    "prefix_queries": "vllm:prefix_cache_queries",
    "prefix_hits": "vllm:prefix_cache_hits",
    "request_success": "vllm:request_success",
    "spec_drafts": "vllm:spec_decode_num_drafts",
    "spec_draft_tokens": "vllm:spec_decode_num_draft_tokens",
    "spec_accepted": "vllm:spec_decode_num_accepted_tokens",
    "running": "vllm:num_requests_running",
    "waiting": "vllm:num_requests_waiting",
}
SECONDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
TOKENS = (1, 8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288)
FINISH_REASONS = ("stop", "length")  # what the adapter's generations end with


class AdapterMetrics:
    def __init__(self, model_name: str) -> None:
        self.registry = CollectorRegistry()
        self.model = model_name
        label = ["model_name"]

        def hist(key: str, doc: str, buckets: tuple[float, ...] = SECONDS) -> Histogram:
            return Histogram(NAMES[key], doc, label, buckets=buckets, registry=self.registry)

        def count(key: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(NAMES[key], doc, [*label, *extra], registry=self.registry)

        self.ttft = hist("ttft", "request arrival to first token")
        self.queue = hist("queue", "wait for the generator (one request at a time)")
        self.prefill = hist("prefill", "generator start to first token")
        self.decode = hist("decode", "first token to last")
        self.inference = hist("inference", "prefill + decode")
        self.e2e = hist("e2e", "request arrival to last token")
        self.itl = hist("itl", "one observation per engine step after the first token (a verify step)")
        self.req_prompt = hist("req_prompt_tokens", "prompt tokens per request", TOKENS)
        self.req_generation = hist("req_generation_tokens", "generated tokens per request", TOKENS)
        self.prompt_tokens = count("prompt_tokens", "prompt tokens")
        self.generation_tokens = count("generation_tokens", "generated tokens")
        self.prefix_queries = count("prefix_queries", "prompt tokens looked up in the page cache")
        self.prefix_hits = count("prefix_hits", "prompt tokens found in the page cache")
        self.success = count("request_success", "finished requests", ("finished_reason",))
        self.spec_drafts = count("spec_drafts", "verify steps over draft tokens")
        self.spec_draft_tokens = count("spec_draft_tokens", "draft tokens verified")
        self.spec_accepted = count("spec_accepted", "draft tokens accepted")
        self.running = Gauge(NAMES["running"], "requests generating", label, registry=self.registry)
        self.waiting = Gauge(NAMES["waiting"], "requests waiting for the generator", label, registry=self.registry)
        # Every series exists from the start, at zero, as vLLM's do: a scrape before the first request must hold
        # what the scrape after it holds, or that request's deltas are unknown (the H200 run's first request).
        for family in (
            self.ttft, self.queue, self.prefill, self.decode, self.inference, self.e2e, self.itl, self.req_prompt,
            self.req_generation, self.prompt_tokens, self.generation_tokens, self.prefix_queries, self.prefix_hits,
            self.spec_drafts, self.spec_draft_tokens, self.spec_accepted, self.running, self.waiting,
        ):  # fmt: skip
            family.labels(self.model)
        for reason in FINISH_REASONS:
            self.success.labels(self.model, reason)

    def step(self, first: bool, step_s: float, drafted: int) -> None:
        """One engine step of the request in flight."""
        if not first:
            self.itl.labels(self.model).observe(step_s)
        if drafted:
            self.spec_drafts.labels(self.model).inc()
            self.spec_draft_tokens.labels(self.model).inc(drafted)

    def finished(self, done: Finished, queue_s: float, ttft_s: float, e2e_s: float) -> None:
        """The request's histograms, all at once (as vLLM records them in one engine step)."""
        m = self.model
        self.queue.labels(m).observe(queue_s)
        self.ttft.labels(m).observe(ttft_s)
        self.prefill.labels(m).observe(done.prefill_s)
        self.decode.labels(m).observe(done.decode_s)
        self.inference.labels(m).observe(done.prefill_s + done.decode_s)
        self.e2e.labels(m).observe(e2e_s)
        self.req_prompt.labels(m).observe(done.prompt_tokens)
        self.req_generation.labels(m).observe(done.completion_tokens)
        self.prompt_tokens.labels(m).inc(done.prompt_tokens)
        self.generation_tokens.labels(m).inc(done.completion_tokens)
        self.prefix_queries.labels(m).inc(done.prompt_tokens)
        self.prefix_hits.labels(m).inc(done.cached_tokens)
        self.spec_accepted.labels(m).inc(done.accepted_tokens)
        self.success.labels(m, done.finish_reason).inc()
