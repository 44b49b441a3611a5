"""The candidate side on llama.cpp: teacher forcing through its own top-k probabilities of the next token.

llama.cpp's server scores no prompt positions (`echo` is refused), so each scored position t of a document
is one `POST /completion` whose prompt is the reference's token IDs up to t (a list of IDs: no tokenizer
runs), `n_predict` 1 and `n_probs` k. With `post_sampling_probs` false the server answers the top k of a
softmax over the whole vocabulary of that position's logits, before any sampler: temperature, top-k,
top-p and min-p do not touch them (tests check it; we still send neutral ones). `cache_prompt` keeps the
slot's KV cache, so a request prefills only what differs from the previous one: the newest token (and the
token the previous request generated, which it drops). The one-token steps are llama.cpp's own decode
path, the one generation uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import httpx

from frank.errors import FrankError

# neutral samplers; the probabilities asked for are pre-sampling anyway
_SAMPLING = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "post_sampling_probs": False}


def next_token_logprobs(client: httpx.Client, base_url: str, prompt: list[int], k: int) -> dict[int, float]:
    """llama.cpp's top k (token ID -> natural-log probability) for the token after `prompt`."""
    body = {"prompt": prompt, "n_predict": 1, "n_probs": k, "cache_prompt": True, "stream": False, **_SAMPLING}
    try:
        response = client.post(f"{base_url}/completion", json=body)
    except httpx.HTTPError as exc:
        raise FrankError(f"fidelity: the engine at {base_url} did not answer: {exc}") from None
    if response.status_code != 200:
        raise FrankError(f"fidelity: the engine answered {response.status_code}: {response.text[:400]}")
    answer = response.json()
    if answer.get("tokens_evaluated") not in (None, len(prompt)):
        # the server added or cut tokens: the position would not be the reference's
        raise FrankError(
            f"fidelity: llama.cpp evaluated {answer['tokens_evaluated']} tokens for a {len(prompt)}-token prompt"
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
