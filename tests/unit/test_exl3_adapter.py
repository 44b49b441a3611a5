"""frank's exllamav3 adapter's HTTP API, over FakeGeneratorNoCuda: exllamav3 cannot run without CUDA, so on
this machine its model and generator layer is replaced (frank/engine/exl3/fake_no_cuda.py says so); the real
layer runs on the H200 machine (scripts/device_exl3.sh). What is real here: the server, its routes, the
engine's key, streaming, tool calls in the chat template's format, /metrics read by frank's own metrics
layer, and prompt log-probabilities read by frank's own fidelity candidate."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import httpx
import openai
import pytest

from frank.engine.exl3 import metrics as adapter_metrics
from frank.engine.exl3.fake_no_cuda import VOCAB, FakeGeneratorNoCuda, fake_logprobs
from frank.engine.exl3.server import control_token, parse_args, safe_prefix, serve
from frank.engine.exl3.tools import split_tool_calls
from frank.engine.metrics import names as frank_names
from frank.engine.metrics.per_request import request_delta
from frank.engine.metrics.scrape import fetch_metrics
from frank.fidelity.candidate import engine_logprobs, engine_tokenize

TOKEN = "engine-token"
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


class Running:
    def __init__(self, parser: str) -> None:
        self.fake = FakeGeneratorNoCuda(max_model_len=512, tool_parser=parser, answer="ok " * 5)
        args, extra = parse_args(
            ["--model", "/nowhere", "--served-model-name", "fake", "--port", "0", "--tool-call-parser", parser]
        )
        assert extra == []
        self.server = serve(self.fake, args, TOKEN)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.http = httpx.Client(timeout=10, headers={"Authorization": f"Bearer {TOKEN}"})
        self.client = openai.OpenAI(base_url=self.url + "/v1", api_key=TOKEN, max_retries=0)

    def close(self) -> None:
        self.http.close()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture(scope="module", params=["deepseek_v3", "hermes"])
def running(request) -> Iterator[Running]:
    server = Running(request.param)
    yield server
    server.close()


@pytest.fixture(scope="module")
def deepseek() -> Iterator[Running]:
    server = Running("deepseek_v3")
    yield server
    server.close()


def test_health_is_open_and_every_other_route_needs_the_engines_key(deepseek):
    bare = httpx.Client(timeout=5)
    assert bare.get(deepseek.url + "/health").status_code == 200
    for method, path in [("GET", "/metrics"), ("GET", "/v1/models"), ("POST", "/v1/chat/completions"),
                         ("POST", "/v1/completions"), ("POST", "/tokenize")]:  # fmt: skip
        assert bare.request(method, deepseek.url + path).status_code == 401, path
        wrong = bare.request(method, deepseek.url + path, headers={"Authorization": "Bearer engine-tokem"})
        assert wrong.status_code == 401, path
    assert deepseek.fake.generated == [], "an unauthorized request reached the generator"
    bare.close()


def test_the_server_refuses_to_start_without_a_token(monkeypatch):
    monkeypatch.delenv("FRANK_CONTROL_TOKEN", raising=False)
    with pytest.raises(SystemExit, match="FRANK_CONTROL_TOKEN is not set"):
        control_token()


def test_chat_completion_answers_with_usage(deepseek):
    answer = deepseek.client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "hi"}], max_tokens=50, temperature=0
    )
    assert answer.choices[0].message.content == "ok ok ok ok ok "
    assert answer.choices[0].finish_reason == "stop"
    prompt = deepseek.fake.chat_prompt([{"role": "user", "content": "hi"}], None)
    assert answer.usage.prompt_tokens == len(prompt) and answer.usage.completion_tokens == 15
    short = deepseek.client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "hi"}], max_tokens=4
    )
    assert (short.choices[0].message.content, short.choices[0].finish_reason) == ("ok o", "length")


def test_tool_calls_come_back_parsed_in_the_templates_format(running):
    answer = running.client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "please call lookup"}], tools=TOOLS, max_tokens=200
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Sure."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls] == [
        ("lookup", {"x": 1})
    ]
    # the same words without tools offered are text, not a call
    plain = running.client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "please call lookup"}], max_tokens=200
    )
    assert plain.choices[0].message.tool_calls is None


def test_streaming_sends_text_then_the_tool_call_and_never_the_call_block_as_text(running):
    stream = running.client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "call lookup"}], tools=TOOLS, max_tokens=200,
        stream=True, stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert text == "Sure."
    assert [(tc.function.name, json.loads(tc.function.arguments)) for tc in calls] == [("lookup", {"x": 1})]
    assert finish == ["tool_calls"]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_streaming_plain_text_arrives_in_pieces(deepseek):
    stream = deepseek.client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "hi"}], max_tokens=50, stream=True
    )
    pieces = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert "".join(pieces) == "ok ok ok ok ok " and len(pieces) > 2


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"model": "other", "messages": [{"role": "user", "content": "x"}]}, 404, "The model `other` does not exist"),
        ({"model": "fake", "messages": []}, 400, "messages must be a non-empty list"),
        ({"model": "fake", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, 400, "max_tokens"),
        ({"model": "fake", "messages": [{"role": "user", "content": "x" * 600}]}, 400, "fill the context of 512"),
    ],
)
def test_bad_requests_are_refused_by_name(deepseek, body, status, message):
    reply = deepseek.http.post(deepseek.url + "/v1/chat/completions", json=body)
    assert reply.status_code == status
    assert message in reply.json()["error"]["message"]


def test_a_body_that_is_not_json_is_refused(deepseek):
    reply = deepseek.http.post(deepseek.url + "/v1/completions", content=b"{not json")
    assert reply.status_code == 400 and "not JSON" in reply.json()["error"]["message"]


def test_frank_reads_the_adapters_metrics_as_vllms():
    # every family the adapter exports is the name frank's metrics layer reads
    readers = {v for k, v in vars(frank_names).items() if k.isupper() and isinstance(v, str)}
    assert set(adapter_metrics.NAMES.values()) <= readers


def test_one_request_gives_frank_its_per_request_values(deepseek):
    before = fetch_metrics(deepseek.http, deepseek.url, TOKEN)
    deepseek.client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "hi"}], max_tokens=50, temperature=0
    )
    after = fetch_metrics(deepseek.http, deepseek.url, TOKEN)
    delta = request_delta(before, after)
    assert delta.attributed, delta.reason
    # the fake's 15 tokens: the first from the prompt's step, then five verify steps of 3 drafts, which
    # yield 3, 3, 3, 3 and 2 tokens (accepted drafts + one): 9 of the 15 drafts accepted
    assert (delta.generation_tokens, delta.decode_steps, delta.drafted_steps) == (15, 5, 5)
    assert (delta.draft_tokens, delta.accepted_tokens) == (15, 9)
    assert delta.e2e_s is not None and delta.e2e_s >= delta.ttft_s > 0


def test_a_fresh_engines_first_request_has_every_value_as_on_vllm():
    """On the H200 machine the first request of a W01 replay had no drafted steps while the next four had
    62 each: the adapter's labelled families had no series before their first use, so the scrape before the
    first request lacked them. Like vLLM's, every series exists from the start, at zero."""
    fresh = Running("deepseek_v3")
    try:
        before = fetch_metrics(fresh.http, fresh.url, TOKEN)
        fresh.client.chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "hi"}], max_tokens=50, temperature=0
        )
        delta = request_delta(before, fetch_metrics(fresh.http, fresh.url, TOKEN))
        assert (delta.drafted_steps, delta.draft_tokens, delta.accepted_tokens) == (5, 15, 9)
        assert delta.decode_steps == 5 and delta.prefill_s is not None
    finally:
        fresh.close()


def test_frank_fidelity_reads_prompt_logprobs_from_the_adapter(deepseek):
    documents = [deepseek.fake.encode("abc hello"), deepseek.fake.encode("zz")]
    rows = engine_logprobs(deepseek.http, deepseek.url, "fake", documents, 4, kind="exl3")
    assert len(rows) == sum(len(d) - 1 for d in documents)
    expected = []
    for ids in documents:
        for t in range(1, len(ids)):
            lps = fake_logprobs(ids[t - 1])
            expected.append({v: lps[v] for v in sorted(range(VOCAB), key=lambda v: -lps[v])[:4]})
    assert rows == pytest.approx(expected)
    assert engine_tokenize(deepseek.http, deepseek.url, "fake", "abc", kind="exl3") == deepseek.fake.encode("abc")


def test_prompt_logprobs_must_be_a_positive_count(deepseek):
    body = {"model": "fake", "prompt": [1, 2, 3], "max_tokens": 1, "prompt_logprobs": True}
    reply = deepseek.http.post(deepseek.url + "/v1/completions", json=body)
    assert reply.status_code == 400 and "prompt_logprobs must be a positive integer" in reply.text


@pytest.mark.parametrize(
    "text",
    [
        # arguments that are not a JSON object: the answer stays text, nothing is guessed
        "x<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n[1]\n```<｜tool▁call▁end｜>",
        "x<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{oops\n```<｜tool▁call▁end｜>",
        "x<｜tool▁calls▁begin｜> and nothing after",
        "no call at all",
    ],
)
def test_malformed_calls_stay_text(text):
    assert split_tool_calls("deepseek_v3", text) == (text, [])


def test_hermes_calls_need_a_name_and_object_arguments():
    for body in ('{"arguments": {}}', '{"name": "f", "arguments": "x"}', '{"name": 3, "arguments": {}}'):
        text = f"<tool_call>{body}</tool_call>"
        assert split_tool_calls("hermes", text) == (text, [])


def test_streaming_holds_back_what_could_be_the_start_of_a_call_block():
    marker = "<tool_call>"
    assert safe_prefix("hello <tool", marker) == len("hello ")
    assert safe_prefix("hello <tool_call>{", marker) == len("hello ")
    assert safe_prefix("hello", marker) == 5
    assert safe_prefix("a < b", marker) == 5


def test_the_server_without_exllamav3_says_so_and_exits(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "FRANK_CONTROL_TOKEN": TOKEN}
    argv = ["--model", str(tmp_path), "--served-model-name", "x", "--port", "1", "--expert-stats-dir", str(tmp_path)]
    done = subprocess.run([sys.executable, "-m", "frank.engine.exl3.server", *argv], capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip
    assert done.returncode == 1
    assert "exllamav3 cannot be imported by" in done.stderr
