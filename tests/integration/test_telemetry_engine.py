"""Telemetry against the real embedded engine: the sampler finds it through the controller, and one chat
request's server-side deltas agree with the response's own usage and the client's timing."""

from __future__ import annotations

import time

import httpx
import pytest

from frank.engine import metrics as m
from frank.telemetry.sampler import Sampler, controller_target

pytestmark = pytest.mark.engine

PROMPT = "The operator watches the GPU, the PCIe link and the CPU expert pool. " * 10


def chat(client: httpx.Client, url: str, max_tokens: int) -> tuple[dict, float]:
    t0 = time.monotonic()
    resp = client.post(
        url + "/v1/chat/completions",
        json={
            "model": "tiny-frank",
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": max_tokens,
            "temperature": 0,
            "ignore_eos": True,
        },
    )
    resp.raise_for_status()
    return resp.json(), time.monotonic() - t0


def test_sampler_watches_the_engine_through_the_controller(engine):
    st = engine.status()
    s = Sampler(controller_target(engine), period_s=1.0)
    s.sample_once()
    time.sleep(0.5)
    snap = s.sample_once()
    s.stop()
    assert snap.engine.state == "ready" and snap.engine.url == st.url
    assert snap.engine.metrics.ok and "tiny-frank" in snap.engine.metrics.model_names
    eng = snap.cpu.engine
    assert eng is not None and eng.pid == st.pid
    assert len(eng.pids) >= 2  # the API server and its EngineCore process
    assert eng.num_threads > 10 and eng.rss_bytes > 100 * 2**20 and eng.cpu_percent is not None
    assert snap.gpu.gpus or snap.gpu.error.startswith("no GPU telemetry (")


def test_one_requests_delta_matches_its_usage_and_timing(engine):
    url = engine.status().url
    with httpx.Client(timeout=300) as client:
        chat(client, url, 4)  # warm: the measured request then hits the prefix cache
        before = m.fetch_metrics(client, url, model_name="tiny-frank")
        assert before.gauge(m.RUNNING) == 0 and before.gauge(m.WAITING) == 0
        body, client_s = chat(client, url, 32)
        after = m.fetch_settled(client, url, before, model_name="tiny-frank")
    d = m.request_delta(before, after)
    usage = body["usage"]
    assert d.attributed, d.reason
    assert d.prompt_tokens == usage["prompt_tokens"]
    assert d.generation_tokens == usage["completion_tokens"] == 32
    # server time sits inside the client's: e2e runs from arrival to the last token
    assert 0 < d.ttft_s <= d.e2e_s <= client_s
    assert client_s - d.e2e_s < max(0.25, 0.5 * client_s)
    assert d.front_end_s == pytest.approx(d.ttft_s - d.queue_s - d.prefill_s) and d.front_end_s > 0
    assert d.cached_tokens > 0 and d.cached_tokens <= d.prompt_tokens
    # ngram speculative decoding: every verify step yields 1 + its accepted drafts (the last may be cut
    # at max_tokens), the first token comes from the prefill
    assert d.drafted_steps > 0 and 1.0 <= d.acceptance_length <= 1 + 8
    assert 1 + d.decode_steps <= d.generation_tokens <= 1 + d.decode_steps + d.accepted_tokens
    # a verify step is every decode step, drafted or not (frank/engine/measures.py)
    assert d.drafted_steps <= d.decode_steps and d.verify_step_s == pytest.approx(d.decode_s / d.decode_steps)
    # the response carries its own timings (--enable-per-request-metrics): the same engine-core timestamps
    own, _ = m.response_values(body["metrics"], usage["completion_tokens"], usage["prompt_tokens"], client_s)
    assert own.decode_s == pytest.approx(d.decode_s, abs=1e-6) and own.queue_s == pytest.approx(d.queue_s, abs=1e-6)
    assert own.drafted_steps == d.drafted_steps and own.accepted_tokens == d.accepted_tokens


def test_sampler_thread_attributes_a_lone_request(engine):
    url = engine.status().url
    s = Sampler(controller_target(engine), period_s=0.2, gpu=False)
    with s, httpx.Client(timeout=300) as client:
        time.sleep(0.5)  # an idle sample first
        body, _ = chat(client, url, 24)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            snap = s.latest()
            last = snap.engine.last_request if snap else None
            if last is not None and last.generation_tokens == 24:
                break
            time.sleep(0.1)
    assert last is not None and last.attributed
    assert last.prompt_tokens == body["usage"]["prompt_tokens"]
    assert snap.engine.rates.valid and snap.engine.rates.running == 0
