"""What the adapter's HTTP side asks of a generator, and the events a generation yields.

One generation at a time: the server holds a lock around `generate` and `prompt_logprobs`, so a request's
queue time is its wait for that lock (frank's campaign sends one agent request at a time).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Sampling:
    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    ignore_eos: bool = False  # vLLM's extension: decode max_tokens whatever the model says (benchmarks)


@dataclass(frozen=True)
class Piece:
    """What one engine step added: the first step's token, or a verify step's accepted drafts plus one."""

    text: str
    tokens: int
    step_s: float  # the step's wall time
    drafted: int = 0  # draft tokens this step verified (0: no draft)


@dataclass(frozen=True)
class Finished:
    finish_reason: str  # "stop" or "length", as OpenAI's API says them
    prompt_tokens: int
    cached_tokens: int  # prompt tokens taken from the page cache
    completion_tokens: int
    prefill_s: float  # from the job's start to its first token
    decode_s: float  # from the first token to the last
    accepted_tokens: int = 0  # draft tokens the target accepted


Event = Piece | Finished


class Generator(Protocol):
    """The model and its generator, as the HTTP side sees them."""

    max_model_len: int
    num_draft_tokens: int  # draft tokens per verify step (0: no draft model loaded)

    def encode(self, text: str) -> list[int]:
        """Token IDs of `text` as a prompt (special tokens as the model's tokenizer adds them)."""
        ...

    def chat_prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        """The chat template's token IDs for these messages and tools, ending in the assistant's turn."""
        ...

    def generate(self, prompt: list[int], sampling: Sampling) -> Iterator[Event]:
        """Pieces as the steps make them, then one Finished."""
        ...

    def prompt_logprobs(self, prompt: list[int], k: int) -> list[dict[int, float]]:
        """For each position t >= 1: the top k (token ID -> natural-log probability) of token t given the
        tokens before it, from one forward pass over the prompt."""
        ...
