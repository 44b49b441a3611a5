"""llama.cpp's /metrics onto frank's measures: the counters that mean the same thing are mapped, the rest
is reported as not available with the reason, never as 0. The exposition is one llama.cpp 2026.10 scrape
(xllamacpp serving SmolLM2) with its numbers changed per test."""

from __future__ import annotations

from frank.engine import metrics as m

SCRAPE = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {prompt}
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total {cached}
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total {prompt_s}
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total {predicted}
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total {predicted_s}
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total {decodes}
# TYPE llamacpp:n_tokens_max counter
llamacpp:n_tokens_max 82
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total {draft_tokens}
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total {accepted}
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total {drafts}
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 31.9451
# TYPE llamacpp:predicted_tokens_seconds gauge
llamacpp:predicted_tokens_seconds 9.8112
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing {processing}
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred {deferred}
"""


def scrape(at: float, **values: float) -> m.MetricsSample:
    base = dict(prompt=53, cached=0, prompt_s=1.6591, predicted=30, predicted_s=2.95581, decodes=30)
    base.update(draft_tokens=0, accepted=0, drafts=0, processing=0, deferred=0)
    base.update(values)
    return m.parse_metrics(SCRAPE.format(**base), taken_at=at)


def test_counters_that_mean_the_same_are_mapped():
    s = scrape(0.0, prompt=100, cached=40, drafts=5, draft_tokens=40, accepted=10, processing=1, deferred=2)
    assert s.kind == "llamacpp"
    assert s.counter(m.PROMPT_TOKENS) == 140  # vLLM counts every prompt token, cached or not
    assert (s.counter(m.PREFIX_HITS), s.counter(m.PREFIX_QUERIES)) == (40, 140)
    assert s.counter(m.GENERATION_TOKENS) == 30
    assert (s.counter(m.SPEC_DRAFTS), s.counter(m.SPEC_DRAFT_TOKENS), s.counter(m.SPEC_ACCEPTED)) == (5, 40, 10)
    assert (s.gauge(m.RUNNING), s.gauge(m.WAITING)) == (1, 2)


def test_window_rates_map_and_name_what_is_missing():
    before = scrape(0.0)
    after = m.parse_metrics(
        SCRAPE.format(
            prompt=253, cached=100, prompt_s=3.6591, predicted=60, predicted_s=5.95581, decodes=60,
            draft_tokens=16, accepted=8, drafts=4, processing=0, deferred=0,
        ),
        taken_at=2.0,
    )  # fmt: skip
    rates = m.window_rates(before, after)
    assert rates.valid
    assert rates.prompt_tokens_per_s == (353 - 53) / 2.0
    assert rates.generation_tokens_per_s == 15.0
    assert abs(rates.prefill_tokens_per_s - 200 / 2.0) < 1e-9  # computed prompt tokens / prompt seconds
    assert abs(rates.decode_tokens_per_s - 30 / 3.0) < 1e-9
    assert rates.prefix_cache_hit_rate == 100 / 300
    assert rates.mean_acceptance_length == 1 + 8 / 4
    # the window's verify steps: generated - accepted (30 tokens, 8 of them accepted drafts) in 3.0 decode s
    assert rates.decode_steps == 22 and abs(rates.window_verify_step_s - 3.0 / 22) < 1e-9
    for name in ("mean_ttft_s", "mean_queue_s", "mean_front_end_s", "kv_cache_usage"):
        assert getattr(rates, name) is None
        assert "llama.cpp" in rates.not_available[name]  # the reason, not a zero


def test_summary_says_the_kind_and_why_values_are_missing():
    summary = m.sample_summary(scrape(0.0))
    assert summary["engine_kind"] == "llamacpp"
    assert summary["mean_ttft_s"] is None and "time-to-first-token" in summary["not_available"]["mean_ttft_s"]
    assert summary["requests_running"] == 0 and summary["generation_tokens"] == 30
    assert abs(summary["decode_tokens_per_s"] - 30 / 2.95581) < 1e-9


def test_a_restart_is_seen_through_the_mapped_counters():
    rates = m.window_rates(scrape(0.0, predicted=500), scrape(1.0, predicted=3))
    assert not rates.valid and "counter reset" in rates.reason


def test_request_values_come_from_the_response_timings():
    assert not m.request_delta(scrape(0.0), scrape(1.0, predicted=31)).attributed
    timings = {"cache_n": 38, "prompt_n": 1, "prompt_ms": 208.178, "predicted_n": 20, "predicted_ms": 1835.435}
    values, sources = m.timings_values({**timings, "draft_n": 16, "draft_n_accepted": 16}, 0.25)
    assert (values.prefill_s, values.decode_s) == (0.208178, 1.835435)
    assert values.prompt_tokens == 39 and values.cached_tokens == 38 and values.generation_tokens == 20
    assert values.decode_steps == 20 - 1 - 16 and values.verify_step_s == 1.835435 / 3
    assert values.queue_s is None and values.front_end_s is None and "queue_s" not in sources
    assert sources["prefill_s"] == m.SOURCE_TIMINGS and sources["ttft_s"] == m.SOURCE_CLIENT_ONLY
    assert m.timings_values(None, 0.1) is None and m.timings_values({"predicted_n": 3}, 0.1) is None


def test_vllm_samples_report_nothing_missing():
    vllm = m.parse_metrics("# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total 5\n")
    assert vllm.kind == "vllm" and m.not_available(vllm) == {}
