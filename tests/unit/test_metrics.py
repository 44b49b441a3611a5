"""frank.engine.metrics on /metrics text captured from the real embedded engine (scripts/capture_metrics_fixtures.py):
before/after one chat request, after a restart (counters reset), and a server without spec decoding."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import threading
from pathlib import Path

import httpx
import pytest

from frank.engine import metrics as m
from tests.unit.metrics_server import FaultyMetricsServer

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "metrics"


def text(name: str) -> str:
    return (FIX / name).read_text()


def sample(name: str, **kw) -> m.MetricsSample:
    return m.parse_metrics(text(name), **kw)


def raw_value(name: str, series: str) -> float:
    """The value of one exposition line, read with a regex: an independent check of the parser's sums."""
    pattern = re.compile(r"^" + re.escape(series) + r"\{[^}]*\} (\S+)$", re.M)
    values = [float(v) for v in pattern.findall(text(name))]
    assert values, f"{series} not in {name}"
    return sum(values)


def test_parse_real_scrape_values_match_the_text():
    s = sample("after.txt")
    assert s.ok and s.model_names == {"tiny-frank"} and s.engines == {"0"}
    assert s.hist(m.TTFT) == (raw_value("after.txt", m.TTFT + "_sum"), raw_value("after.txt", m.TTFT + "_count"))
    assert s.counter(m.PROMPT_TOKENS) == raw_value("after.txt", "vllm:prompt_tokens_total")
    # the `_total` suffix is optional when asking
    assert s.counter("vllm:spec_decode_num_drafts_total") == s.counter(m.SPEC_DRAFTS) > 0
    assert s.gauge(m.KV_USAGE) == raw_value("after.txt", m.KV_USAGE)
    assert s.gauge(m.RUNNING) == 0


def test_request_success_is_summed_over_its_finish_reason_label():
    s = sample("after.txt")
    assert s.counter(m.REQUEST_SUCCESS) == raw_value("after.txt", "vllm:request_success_total") == 2


def test_family_filter_keeps_values_and_none_parses_everything():
    fast, full = sample("after.txt"), sample("after.txt", families=None)
    assert set(fast.names()) <= m.DEFAULT_FAMILIES
    assert len(full.names()) > len(fast.names())
    for name in fast.names():
        assert (fast.hist(name), fast.counter(name), fast.gauge(name)) == (
            full.hist(name),
            full.counter(name),
            full.gauge(name),
        )
    # a histogram whose own name ends in _total keeps it
    assert full.hist("vllm:iteration_tokens_total")[1] > 0
    assert not full.has("vllm:prefix_cache_hits_created")  # `_created` series are dropped


def test_model_name_filter():
    assert sample("after.txt", model_name="tiny-frank").hist(m.E2E) == sample("after.txt").hist(m.E2E)
    other = sample("after.txt", model_name="some-other-model")
    assert other.hist(m.E2E) == (0.0, 0.0) and other.counter(m.PROMPT_TOKENS) is None
    assert other.model_names == {"tiny-frank"}  # what the server serves is still reported
    assert sample("after.txt", engine="0").hist(m.E2E) == sample("after.txt").hist(m.E2E)
    assert sample("after.txt", engine="1").counter(m.PROMPT_TOKENS) is None


def test_request_delta_matches_the_requests_own_usage_and_timing():
    req = json.loads(text("request.json"))
    before, after = sample("before.txt"), sample("after.txt")
    d = m.request_delta(before, after)
    assert d.attributed, d.reason
    assert d.prompt_tokens == req["usage"]["prompt_tokens"]
    assert d.generation_tokens == req["usage"]["completion_tokens"] == req["max_tokens"]
    assert 0 < d.ttft_s <= d.e2e_s <= req["client_s"]
    assert d.front_end_s == pytest.approx(d.ttft_s - d.queue_s - d.prefill_s)
    assert d.inference_s == pytest.approx(d.prefill_s + d.decode_s, abs=1e-3)
    # time per verify step counts every decode step (inter-token-latency observations), drafted or not:
    # this request had a step whose ngram lookup found no draft, so drafts < decode steps
    assert 0 < d.verify_steps < d.decode_steps
    assert d.verify_step_s == pytest.approx(d.decode_s / d.decode_steps)
    # vLLM's decode time is exactly the sum of the request's inter-token latencies (they telescope)
    assert after.hist(m.ITL)[0] - before.hist(m.ITL)[0] == pytest.approx(d.decode_s, abs=1e-6)
    pos = d.acceptance_per_position
    assert pos is not None and list(pos) == sorted(pos, reverse=True) and 0 < pos[0] <= 1
    assert sum(pos) * d.verify_steps == pytest.approx(d.accepted_tokens)
    assert d.acceptance_length == pytest.approx(1 + d.accepted_tokens / d.verify_steps)
    assert 0 <= d.accepted_tokens <= d.draft_tokens
    # the warm-up request sent the same prompt: most of it came from the prefix cache
    assert 0 < d.cached_tokens < d.prompt_tokens


def test_no_request_between_scrapes_is_not_attributed():
    d = m.request_delta(sample("before.txt"), sample("before.txt"))
    assert not d.attributed and "no request finished" in d.reason and d.e2e_s is None


def test_two_requests_between_scrapes_are_not_attributed():
    before = sample("no_spec_decode_before.txt")  # a fresh server: nothing finished, all counters zero
    after = sample("after.txt")  # a warm-up and the measured request finished: counts rose by 2
    d = m.request_delta(before, after)
    assert not d.attributed and "2 requests finished" in d.reason


def test_counter_reset_after_restart_gives_no_negative_delta():
    d = m.request_delta(sample("after.txt"), sample("after_restart.txt"))
    assert not d.attributed and "counter reset" in d.reason
    assert all(getattr(d, f.name) is None for f in dataclasses.fields(d) if f.name not in ("attributed", "reason"))
    w = m.window_rates(sample("after.txt"), sample("after_restart.txt", taken_at=1e9))
    assert not w.valid and "counter reset" in w.reason and w.generation_tokens_per_s is None
    assert w.running == 0  # the gauges of the newer sample are still shown


def test_server_without_spec_decoding():
    before, after = sample("no_spec_decode_before.txt"), sample("no_spec_decode.txt")
    assert not after.has(m.SPEC_DRAFTS) and after.counter(m.SPEC_DRAFTS) is None
    req = json.loads(text("no_spec_request.json"))
    d = m.request_delta(before, after)
    assert d.attributed, d.reason
    assert d.generation_tokens == req["usage"]["completion_tokens"]
    assert d.verify_steps is None and d.acceptance_length is None and d.acceptance_per_position is None
    assert d.verify_step_s == pytest.approx(d.decode_s / d.decode_steps)  # a step verifying zero drafts
    assert d.decode_steps == req["usage"]["completion_tokens"] - 1  # one engine step per token after the first
    w = m.window_rates(before, dataclasses.replace(after, taken_at=before.taken_at + 2.0))
    assert w.valid and w.mean_acceptance_length is None and w.mean_ttft_s == pytest.approx(d.ttft_s)


def test_window_rates_between_real_scrapes():
    before = sample("before.txt")
    after = dataclasses.replace(sample("after.txt"), taken_at=before.taken_at + 4.0)
    w = m.window_rates(before, after)
    d = m.request_delta(before, after)
    assert w.valid and w.window_s == 4.0 and w.requests_finished == 1
    assert w.generation_tokens_per_s == pytest.approx(d.generation_tokens / 4.0)
    assert w.prefix_cache_hit_rate == pytest.approx(
        d.cached_tokens / (after.counter(m.PREFIX_QUERIES) - before.counter(m.PREFIX_QUERIES))
    )
    assert w.mean_front_end_s == pytest.approx(d.front_end_s)
    assert w.mean_acceptance_length == pytest.approx(d.acceptance_length)
    itl_s = after.hist(m.ITL)[0] - before.hist(m.ITL)[0]
    assert w.window_verify_step_s == pytest.approx(itl_s / d.decode_steps)


def test_summary_of_one_scrape():
    s = m.sample_summary(sample("after.txt"))
    assert s["state"] == "ok" and s["requests_finished"] == 2 and s["spec_decode"] is True
    assert m.sample_summary(sample("no_spec_decode.txt"))["mean_acceptance_length"] is None


def test_malformed_text_raises_value_error():
    with pytest.raises(ValueError):
        m.parse_metrics('vllm:num_requests_running{engine="0" 1\n')


# -- over HTTP -------------------------------------------------------------------------------------


@pytest.fixture
def faulty():
    server = FaultyMetricsServer(text("after.txt"), token="sekrit")
    yield server
    server.close()


def test_fetch_sends_the_api_key(faulty):
    with httpx.Client(timeout=2) as c:
        ok = m.fetch_metrics(c, faulty.url, api_key="sekrit")
        denied = m.fetch_metrics(c, faulty.url)
    assert ok.ok and ok.counter(m.PROMPT_TOKENS) == sample("after.txt").counter(m.PROMPT_TOKENS)
    assert ok.scrape_s > 0
    assert denied.state == "error" and "401" in denied.error
    assert faulty.seen_auth == ["Bearer sekrit", None]


def test_fetch_http_error_and_garbage(faulty):
    with httpx.Client(timeout=2) as c:
        faulty.status = 500
        assert m.fetch_metrics(c, faulty.url, api_key="sekrit").state == "error"
        faulty.status, faulty.body = 200, 'vllm:num_requests_running{engine="0" 1\n'
        bad = m.fetch_metrics(c, faulty.url, api_key="sekrit")
    assert bad.state == "error" and "unparsable" in bad.error


def test_async_fetch(faulty):
    async def go():
        async with httpx.AsyncClient(timeout=2) as c:
            return await m.afetch_metrics(c, faulty.url, api_key="sekrit", model_name="tiny-frank")

    s = asyncio.run(go())
    assert s.ok and s.hist(m.E2E) == sample("after.txt").hist(m.E2E)


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_down_server_is_unreachable_not_an_exception():
    url = f"http://127.0.0.1:{_closed_port()}"
    with httpx.Client(timeout=1) as c:
        s = m.fetch_metrics(c, url)
        settled = m.fetch_settled(c, url, sample("before.txt"))
    assert s.state == "unreachable" and not s.ok and s.error
    assert settled.state == "unreachable"
    d = m.request_delta(sample("before.txt"), s)
    assert not d.attributed and d.reason.startswith("unreachable")
    assert not m.window_rates(sample("before.txt"), s).valid

    async def go():
        async with httpx.AsyncClient(timeout=1) as c:
            return await m.afetch_metrics(c, url)

    assert asyncio.run(go()).state == "unreachable"


def test_settled_fetch_waits_for_the_request_to_show_up(faulty):
    faulty.body = text("before.txt")
    before = sample("before.txt")

    def finish_later():
        import time

        time.sleep(0.2)
        faulty.body = text("after.txt")

    threading.Thread(target=finish_later).start()
    with httpx.Client(timeout=2) as c:
        after = m.fetch_settled(c, faulty.url, before, api_key="sekrit", timeout_s=3)
    assert m.request_delta(before, after).attributed


def test_response_values_from_a_real_response_and_their_sources():
    rec = json.loads(text("response_metrics.json"))
    values, sources = m.response_values(rec["metrics"], rec["completion_tokens"], rec["prompt_tokens"], 1.3)
    spec = rec["metrics"]["speculative_decoding"]
    assert values.attributed and values.decode_s == pytest.approx(0.09488602499999388)
    assert values.prefill_s == pytest.approx(1.19434148900001)  # vLLM's "time_to_first_token_ms": scheduled -> 1st
    assert values.front_end_s == pytest.approx(1.3 - values.queue_s - values.prefill_s)
    assert values.acceptance_length == pytest.approx(spec["mean_acceptance_length"])
    assert values.decode_steps == 24 - 1 - 17 and values.verify_step_s == pytest.approx(values.decode_s / 6)
    # accepted at position i = steps that accepted more than i: histogram [0, 2, 0, 1, 3] over 6 drafts
    assert values.acceptance_per_position == pytest.approx((6 / 6, 4 / 6, 4 / 6, 3 / 6))
    assert sources["decode_s"] == m.SOURCE_RESPONSE and sources["decode_steps"] == m.SOURCE_DERIVED
    assert sources["front_end_s"] == m.SOURCE_CLIENT
    assert m.response_values(None, 3, 3, 0.1) is None
    d = m.request_delta(sample("before.txt"), sample("after.txt"))
    assert set(m.delta_sources(d).values()) == {m.SOURCE_DELTA} and "decode_s" in m.delta_sources(d)
