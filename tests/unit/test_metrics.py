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
    assert 0 < d.drafted_steps < d.decode_steps
    assert d.verify_step_s == pytest.approx(d.decode_s / d.decode_steps)
    # vLLM's decode time is exactly the sum of the request's inter-token latencies (they telescope)
    assert after.hist(m.ITL)[0] - before.hist(m.ITL)[0] == pytest.approx(d.decode_s, abs=1e-6)
    pos = d.acceptance_per_position
    assert pos is not None and list(pos) == sorted(pos, reverse=True) and 0 < pos[0] <= 1
    assert sum(pos) * d.drafted_steps == pytest.approx(d.accepted_tokens)
    assert d.acceptance_length == pytest.approx(1 + d.accepted_tokens / d.drafted_steps)
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
    assert d.drafted_steps is None and d.acceptance_length is None and d.acceptance_per_position is None
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


REFUSED_ON_026 = ("block-hash-memo", "held-prompt", "idle-release", "shm-idle")


def test_the_plugins_verdicts_are_read_and_the_refused_parts_named():
    """plugins_refused_vllm026.txt: the plugins' series in prometheus_client's exposition, with the verdicts the
    H200 machine's vLLM 0.26.0 gave (docs/gpu-run.md), after a real scrape's gauges."""
    s = sample("plugins_refused_vllm026.txt")
    assert s.refused_plugins() == REFUSED_ON_026 and s.plugins_vllm() == "0.26.0"
    assert s.gauge(m.PLUGINS_REFUSED) == 4.0 == len(s.refused_plugins())
    assert s.gauge(m.PLUGIN_COMPATIBLE) is None  # a verdict per part, never a sum over the parts
    assert dict((p, ok) for p, _v, ok in s.plugins) == {
        "region-cache": True, "detok-tail": True, **dict.fromkeys(REFUSED_ON_026, False)
    }  # fmt: skip
    summary = m.sample_summary(s)
    assert summary["refused_plugins"] == list(REFUSED_ON_026) and summary["plugins_refused"] == 4.0
    assert summary["plugins_vllm"] == "0.26.0"
    # inside a whole real scrape, with the model filter: the plugins' series carry no model label and stay
    whole = m.parse_metrics(text("after.txt") + text("plugins_refused_vllm026.txt"), "tiny-frank")
    assert whole.refused_plugins() == REFUSED_ON_026 and whole.gauge(m.RUNNING) == 0.0
    # an engine whose plugins export nothing (a scrape from before they did, llama.cpp): nothing refused
    assert sample("after.txt").refused_plugins() == () and m.sample_summary(sample("after.txt"))["plugins_vllm"] is None


def test_a_verdict_that_is_not_exactly_1_counts_as_refused():
    line = 'frank:plugin_compatible{{part="region-cache",vllm="0.27.0"}} {}\n'
    head = "# TYPE frank:plugin_compatible gauge\n"
    for value in ("0.0", "0.5", "2.0"):
        assert m.parse_metrics(head + line.format(value)).refused_plugins() == ("region-cache",)
    assert m.parse_metrics(head + line.format("1.0")).refused_plugins() == ()


def test_the_engine_view_carries_the_refused_parts():
    from frank.telemetry.sampler import EngineView

    ok = EngineView("ready", "http://127.0.0.1:1", 1, sample("plugins_refused_vllm026.txt"), None, None)
    assert ok.refused_plugins == REFUSED_ON_026
    assert EngineView("ready", "http://127.0.0.1:1", 1, m.unreachable("down"), None, None).refused_plugins == ()
    assert EngineView("stopped", None, None, None, None, None).refused_plugins == ()


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


# -- the sampler's scraper: one kept-alive connection, the wanted families parsed only when they change ----


def test_the_family_blocks_select_what_a_line_by_line_pass_selects():
    for name in ("before.txt", "after.txt", "after_restart.txt", "no_spec_decode.txt"):
        body = text(name)
        assert body.startswith("# HELP ")  # prometheus_client's exposition: a block per family
        by_line = m._select_each_line(body.split("\n"), m.DEFAULT_FAMILIES)
        assert (
            m._select_lines(body, m.DEFAULT_FAMILIES) == by_line and "vllm:e2e_request_latency_seconds_sum" in by_line
        )
    bare = '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0"} 2.0\n'  # no HELP lines
    assert m.parse_metrics(bare).gauge(m.RUNNING) == 2.0


def test_a_cached_parse_never_returns_stale_values():
    body = text("after.txt")
    m._parse_wanted.cache_clear()
    first, again = m.parse_metrics(body), m.parse_metrics(body)
    assert m._parse_wanted.cache_info().hits == 1 and first.counter(m.PROMPT_TOKENS) == again.counter(m.PROMPT_TOKENS)
    assert again.taken_at >= first.taken_at  # a new sample each time, only the parse is shared
    busy = body.replace(
        'vllm:num_requests_running{engine="0",model_name="tiny-frank"} 0.0',
        'vllm:num_requests_running{engine="0",model_name="tiny-frank"} 3.0',
    )
    assert busy != body and m.parse_metrics(busy).gauge(m.RUNNING) == 3.0
    assert m.parse_metrics(body).gauge(m.RUNNING) == 0.0
    # a change outside the wanted families (the process's own metrics change every scrape) reuses the parse
    hits = m._parse_wanted.cache_info().hits
    m.parse_metrics(body.replace("process_cpu_seconds_total 9.8", "process_cpu_seconds_total 9.9"))
    assert m._parse_wanted.cache_info().hits == hits + 1


def test_scraper_sends_the_api_key_and_reports_errors(faulty):
    ok = m.MetricsScraper(faulty.url, api_key="sekrit")
    assert ok.fetch().counter(m.PROMPT_TOKENS) == sample("after.txt").counter(m.PROMPT_TOKENS)
    denied = m.MetricsScraper(faulty.url).fetch()
    assert denied.state == "error" and "401" in denied.error
    faulty.status = 500
    assert ok.fetch().state == "error"
    faulty.status, faulty.body = 200, 'vllm:num_requests_running{engine="0" 1\n'
    bad = ok.fetch()
    assert bad.state == "error" and "unparsable" in bad.error
    down = m.MetricsScraper(f"http://127.0.0.1:{_closed_port()}", timeout_s=1).fetch()
    assert down.state == "unreachable" and "ConnectionRefusedError" in down.error


def test_scraper_keeps_one_connection_and_reopens_one_the_server_closed():
    server = FaultyMetricsServer(text("after.txt"), keep_alive_s=0.3)
    try:
        scraper = m.MetricsScraper(server.url)
        assert all(scraper.fetch().ok for _ in range(3))
        assert len(server.connections) == 3 and len(set(server.connections)) == 1  # one connection, kept
        import time

        time.sleep(0.6)  # the server drops the idle connection, as uvicorn does after its keep-alive
        after = scraper.fetch()
        assert after.ok and len(set(server.connections)) == 2, after.error  # reopened at once, no error shown
        scraper.close()
    finally:
        server.close()


def test_a_kept_alive_connection_closed_as_the_scrape_goes_out_is_tried_again_once():
    """llama.cpp's server closes a connection idle for 5 s; a replay's scrape that crosses the close got
    "Server disconnected" and recorded no drafted steps. One more try, on a new connection, reads the
    counters; a server that drops every reused connection still gives a sample, never an exception."""
    server = FaultyMetricsServer(text("after.txt"), keep_alive_s=5)
    try:
        with httpx.Client(timeout=2) as c:
            assert m.fetch_metrics(c, server.url).ok
            server.drop_reused = 1
            again = m.fetch_metrics(c, server.url)
            assert again.ok, again.error
            assert again.counter(m.PROMPT_TOKENS) == sample("after.txt").counter(m.PROMPT_TOKENS)
            assert server.drop_reused == 0 and len(set(server.connections)) == 2  # dropped, then a new one

        async def scrape_twice() -> tuple[m.MetricsSample, m.MetricsSample]:
            async with httpx.AsyncClient(timeout=2) as c:
                first = await m.afetch_metrics(c, server.url)
                server.drop_reused = 1
                return first, await m.afetch_metrics(c, server.url)

        first, second = asyncio.run(scrape_twice())
        assert first.ok and second.ok and server.drop_reused == 0, second.error

        server.drop_reused = 2  # the try again is dropped too (it reused no connection: a new one answers)
        with httpx.Client(timeout=2) as c:
            assert m.fetch_metrics(c, server.url).ok
            assert m.fetch_metrics(c, server.url).ok and server.drop_reused == 1
    finally:
        server.close()
