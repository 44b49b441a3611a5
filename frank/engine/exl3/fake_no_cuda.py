"""A stand-in for exllamav3's model and generator, for tests on a machine without CUDA ONLY.

exllamav3 cannot run without CUDA (its extension compiles for the GPU on import, its kernels are CUDA), so on
this machine the adapter's HTTP side (routes, streaming, tool calls, the engine's key, /metrics, prompt
log-probabilities in vLLM's shape) is tested over this fake, and the real layer (exl3_generator) runs on the
H200 machine (scripts/device_exl3.sh). Nothing here pretends to be a model: byte-level token IDs, a fixed
answer, and log-probabilities from a fixed formula, so a test can compute what the server must return.
"""

from __future__ import annotations

import codecs
import math
import re
from collections.abc import Iterator
from typing import Any

from frank.engine.exl3.generator import Event, Finished, Piece, Sampling

BOS = 1
OFFSET = 3  # byte b is token b + OFFSET
VOCAB = 256 + OFFSET
DRAFT = 3  # draft tokens per verify step; the fake accepts all but the last


def fake_logprobs(previous: int) -> list[float]:
    """The fake's natural-log distribution of the next token after `previous`: closer IDs are likelier."""
    logits = [-abs(v - previous) / 8.0 for v in range(VOCAB)]
    top = max(logits)
    norm = top + math.log(sum(math.exp(x - top) for x in logits))
    return [x - norm for x in logits]


class FakeGeneratorNoCuda:
    """The Generator protocol without a model (see the module's docstring: tests without CUDA only)."""

    def __init__(self, max_model_len: int = 4096, tool_parser: str = "deepseek_v3", answer: str = "ok ") -> None:
        self.max_model_len = max_model_len
        self.num_draft_tokens = DRAFT
        self.tool_parser = tool_parser
        self.answer = answer
        self.generated: list[list[int]] = []  # every prompt it was asked to continue

    def encode(self, text: str) -> list[int]:
        return [BOS] + [b + OFFSET for b in text.encode("utf-8")]

    def decode(self, ids: list[int]) -> str:
        return bytes(t - OFFSET for t in ids if t >= OFFSET).decode("utf-8", "replace")

    def chat_prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        names = " ".join(t["function"]["name"] for t in tools or [])
        text = "".join(f"{m['role']}: {m.get('content') or ''}\n" for m in messages)
        return self.encode((f"tools: {names}\n" if names else "") + text + "assistant: ")

    def _answer_for(self, prompt: list[int]) -> str:
        """A tool call when the prompt lists tools and its last turn says `call NAME`, else the fixed answer."""
        text = self.decode(prompt)
        tools = re.search(r"^tools: (.*)$", text, re.M)
        wanted = re.findall(r"call (\w+)", text.rsplit("user: ", 1)[-1])
        if tools and wanted and wanted[0] in tools.group(1).split():
            if self.tool_parser == "hermes":
                return f'Sure.<tool_call>\n{{"name": "{wanted[0]}", "arguments": {{"x": 1}}}}\n</tool_call>'
            return (
                f"Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{wanted[0]}\n"
                '```json\n{"x": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
            )
        return self.answer

    def generate(self, prompt: list[int], sampling: Sampling) -> Iterator[Event]:
        self.generated.append(list(prompt))
        answer = self.encode(self._answer_for(prompt))[1:]
        out = answer[: sampling.max_tokens]
        pos, accepted = 0, 0
        text = codecs.getincrementaldecoder("utf-8")("replace")  # a character split over steps waits, as exllamav3's
        while pos < len(out):
            n = 1 if pos == 0 else min(DRAFT, len(out) - pos)  # a verify step: accepted drafts + one token
            piece = text.decode(bytes(t - OFFSET for t in out[pos : pos + n]))
            yield Piece(piece, n, 0.001, DRAFT if pos else 0)
            accepted += n - 1
            pos += n
        yield Finished(
            finish_reason="length" if len(answer) > sampling.max_tokens else "stop",
            prompt_tokens=len(prompt),
            cached_tokens=0,
            completion_tokens=len(out),
            prefill_s=0.001,
            decode_s=0.001 * max(len(out) - 1, 0),
            accepted_tokens=accepted,
        )

    def prompt_logprobs(self, prompt: list[int], k: int) -> list[dict[int, float]]:
        rows = []
        for t in range(1, len(prompt)):
            lps = fake_logprobs(prompt[t - 1])
            top = sorted(range(VOCAB), key=lambda v: -lps[v])[:k]
            row = {v: lps[v] for v in top}
            row.setdefault(prompt[t], lps[prompt[t]])
            rows.append(row)
        return rows
