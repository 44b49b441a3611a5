"""The candidate side on llama.cpp: teacher forcing through its own top-k probabilities of the next token.

llama.cpp's server scores no prompt positions (`echo` is refused), so each scored position t of a document
is one `POST /completion` whose prompt is the reference's token IDs up to t (a list of IDs: no tokenizer
runs, no BOS is added), `n_predict` 1 and `n_probs` k. With `post_sampling_probs` false the server answers
the top k of a softmax over the whole vocabulary of that position's logits, before any sampler runs.

- Every position is computed the same way: one token decoded on top of the slot's cached prefix
  (`cache_prompt`), llama.cpp's generation path. A batched prefill of the same position gives slightly
  different numbers (its matrix kernels differ), so an answer that prefilled more than one token (another
  client took the slot's cache) is asked again, now from the cache.
- The one token generated is forced to a plain ASCII one (greedy, `logit_bias`; samplers run after the
  probabilities are read): llama.cpp withholds a generated token that ends inside a UTF-8 character, and
  its probabilities with it.

`llamacpp_tokenize` is the engine's own tokenizer (`POST /tokenize`, special tokens added as for a prompt):
the IDs a measure without a reference model teacher-forces (frank.fidelity.control).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypedDict, cast

import httpx

from frank.errors import FrankError
from frank.fidelity.engine_http import post_json

_FORCED = {"temperature": 0.0, "logit_bias": [["x", 1000.0]], "post_sampling_probs": False}
_RETRIES = 3


class CompletionReply(TypedDict):
    """What frank reads of llama.cpp's /completion reply (n_probs set, one token decoded)."""

    tokens_evaluated: int
    timings: dict[str, float]  # prompt_n: the prompt tokens it computed (not served from its cache)
    completion_probabilities: list[dict[str, Any]]  # per token: top_logprobs, each {id, logprob, ...}


def _ask(client: httpx.Client, base_url: str, prompt: list[int], k: int) -> CompletionReply:
    body = {"prompt": prompt, "n_predict": 1, "n_probs": k, "cache_prompt": True, "stream": False, **_FORCED}
    answer = post_json(client, base_url, "/completion", body)
    if answer.get("tokens_evaluated") != len(prompt):  # the server added or cut tokens: not the reference's
        raise FrankError(
            f"fidelity: llama.cpp evaluated {answer.get('tokens_evaluated')} tokens for a {len(prompt)}-token prompt"
        )
    return cast(CompletionReply, answer)  # the server's JSON at the HTTP edge: a cast, not a check


def next_token_logprobs(client: httpx.Client, base_url: str, prompt: list[int], k: int) -> dict[int, float]:
    """llama.cpp's top k (token ID -> natural-log probability) for the token after `prompt`, computed as one
    token decoded on top of the cached prefix."""
    for _ in range(_RETRIES):
        answer = _ask(client, base_url, prompt, k)
        if answer["timings"]["prompt_n"] <= 1:
            break
    else:
        raise FrankError(
            f"fidelity: llama.cpp recomputed {answer['timings']['prompt_n']} tokens of a {len(prompt)}-token prompt "
            f"{_RETRIES} times in a row: is another client using the engine?"
        )
    probs = answer.get("completion_probabilities") or []
    top = probs[0].get("top_logprobs") if probs else None
    if not top or len(top) != k:
        raise FrankError(
            f"fidelity: llama.cpp returned {len(top or [])} log-probabilities for n_probs {k} (expected {k})"
        )
    return {int(entry["id"]): float(entry["logprob"]) for entry in top}


def llamacpp_logprobs(
    client: httpx.Client,
    base_url: str,
    model: str,
    documents: Iterable[list[int]],
    k: int,
    on_document: Callable[[int], None] | None = None,
) -> list[dict[int, float]]:
    """Every scored position of every document (position t predicts token t + 1), in reference order."""
    del model  # llama.cpp serves one model; /completion takes no name
    out: list[dict[int, float]] = []
    for n, ids in enumerate(documents):
        out.extend(next_token_logprobs(client, base_url, ids[: t + 1], k) for t in range(len(ids) - 1))
        if on_document:
            on_document(n + 1)
    return out


def llamacpp_tokenize(client: httpx.Client, base_url: str, model: str, text: str) -> list[int]:
    """The server's token IDs of `text` as a prompt (BOS added where the model adds one)."""
    del model  # one model per server
    body = {"content": text, "add_special": True}
    return [int(t) for t in post_json(client, base_url, "/tokenize", body, "llama.cpp's /tokenize")["tokens"]]
