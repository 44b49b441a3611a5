"""The candidate side: the running engine, teacher-forced on the reference's token IDs, per engine kind.

Every kind gives, for every scored position, the engine's own top k (token ID -> natural-log probability),
so the measure sees the same shape from either (docs/fidelity.md):

- vLLM (`vllm_logprobs`): one `/v1/completions` per document with the IDs as the prompt, `max_tokens` 1,
  `prompt_logprobs` k. vLLM answers every prompt position after the first with its top k plus the actual
  next token; the extra token is dropped here (llama.cpp cannot give it), so a reference token outside the
  engine's top k is a miss on both kinds alike. The engine's `--max-logprobs` must be at least k.
- llama.cpp (`frank.fidelity.candidate_llamacpp`): one `/completion` per position, `n_probs` k.
- exllamav3 (frank's adapter, frank.engine.exl3): vLLM's request and answer, one forward pass per document.

`engine_tokenize` is each kind's own tokenizer endpoint (`/tokenize`): the token IDs of a measure that has
no reference model to tokenize for it (frank.fidelity.control).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import httpx
import numpy as np

from frank.errors import FrankError
from frank.fidelity.candidate_llamacpp import llamacpp_logprobs, llamacpp_tokenize
from frank.fidelity.engine_http import post_json

Candidate = list[dict[int, float]]  # one mapping token ID -> log-probability per scored position
OnDocument = Callable[[int], None]


def own_top_k(row: dict[int, float], k: int) -> dict[int, float]:
    """The k most likely of what an engine returned for one position."""
    if len(row) <= k:
        return row
    return dict(sorted(row.items(), key=lambda item: -item[1])[:k])


def _max_logprobs_hint(detail: str) -> str:
    return " (raise the profile's --max-logprobs to at least k)" if "max allowed" in detail else ""


def vllm_logprobs(
    client: httpx.Client,
    base_url: str,
    model: str,
    documents: Iterable[list[int]],
    k: int,
    on_document: OnDocument | None = None,
) -> Candidate:
    """vLLM's top k at every scored position of every document, in reference order."""
    out: Candidate = []
    for n, ids in enumerate(documents):
        body = {"model": model, "prompt": ids, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": k}
        answer = post_json(client, base_url, "/v1/completions", body, hint=_max_logprobs_hint)
        rows = answer["choices"][0].get("prompt_logprobs")
        if not rows or len(rows) != len(ids):
            raise FrankError(
                f"fidelity: the engine returned {len(rows or [])} prompt positions for a "
                f"{len(ids)}-token prompt (does it support prompt_logprobs?)"
            )
        out.extend(own_top_k({int(tok): float(e["logprob"]) for tok, e in row.items()}, k) for row in rows[1:])
        if on_document:
            on_document(n + 1)
    return out


# frank's exllamav3 adapter (frank.engine.exl3) answers vLLM's prompt_logprobs and /tokenize
KINDS: dict[str, Callable[..., Candidate]] = {
    "vllm": vllm_logprobs,
    "llamacpp": llamacpp_logprobs,
    "exl3": vllm_logprobs,
}


def engine_logprobs(
    client: httpx.Client,
    base_url: str,
    model: str,
    documents: Iterable[list[int]],
    k: int,
    on_document: OnDocument | None = None,
    *,
    kind: str = "vllm",
) -> Candidate:
    """Teacher-forced top-k log-probabilities of every scored position of every document, in reference
    order, from an engine of `kind`."""
    if kind not in KINDS:
        raise FrankError(f"fidelity cannot measure a {kind} engine (kinds: {', '.join(KINDS)})")
    return KINDS[kind](client, base_url, model, documents, k, on_document)


def vllm_tokenize(client: httpx.Client, base_url: str, model: str, text: str) -> list[int]:
    """vLLM's token IDs of `text` as a prompt (special tokens added as the model's tokenizer adds them)."""
    body = {"model": model, "prompt": text, "add_special_tokens": True}
    return [int(t) for t in post_json(client, base_url, "/tokenize", body, "vLLM's /tokenize")["tokens"]]


TOKENIZERS: dict[str, Callable[..., list[int]]] = {
    "vllm": vllm_tokenize,
    "llamacpp": llamacpp_tokenize,
    "exl3": vllm_tokenize,
}


def engine_tokenize(client: httpx.Client, base_url: str, model: str, text: str, *, kind: str = "vllm") -> list[int]:
    """The token IDs an engine of `kind` gives `text` as a prompt, from its own tokenizer."""
    if kind not in TOKENIZERS:
        raise FrankError(f"fidelity cannot tokenize on a {kind} engine (kinds: {', '.join(TOKENIZERS)})")
    return TOKENIZERS[kind](client, base_url, model, text)


def top_k_arrays(candidate: Candidate, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A candidate's own top k as [positions, k] arrays, so one engine start can stand as the reference for
    another (the engine floor)."""
    ids = np.zeros((len(candidate), k), dtype=np.int64)
    lps = np.zeros((len(candidate), k), dtype=np.float64)
    for i, row in enumerate(candidate):
        best = sorted(row.items(), key=lambda item: -item[1])[:k]
        if len(best) < k:
            raise FrankError(f"fidelity: position {i} has {len(best)} log-probabilities, expected {k}")
        ids[i], lps[i] = [t for t, _ in best], [lp for _, lp in best]
    return ids, lps
