"""The candidate side: the running engine, teacher-forced through vLLM's `prompt_logprobs`.

Each document's token IDs (the reference's) go to `/v1/completions` as the prompt itself, a list of IDs, so
tokenization cannot differ; `max_tokens` 1, `prompt_logprobs` k. vLLM answers, for every prompt position
after the first, its own top k plus the actual next token (up to k + 1 entries), keyed by token ID. The
engine's `--max-logprobs` must be at least k (embedded-cpu sets 64).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import httpx
import numpy as np

from frank.errors import FrankError

Candidate = list[dict[int, float]]  # one mapping token ID -> log-probability per scored position


def engine_logprobs(
    client: httpx.Client,
    base_url: str,
    model: str,
    documents: Iterable[list[int]],
    k: int,
    on_document: Callable[[int], None] | None = None,
) -> Candidate:
    """Teacher-forced log-probabilities of every scored position of every document, in reference order."""
    out: Candidate = []
    for n, ids in enumerate(documents):
        body = {"model": model, "prompt": ids, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": k}
        try:
            response = client.post(f"{base_url}/v1/completions", json=body)
        except httpx.HTTPError as exc:
            raise FrankError(f"fidelity: the engine at {base_url} did not answer: {exc}") from None
        if response.status_code != 200:
            detail = response.text[:400]
            hint = " (raise the profile's --max-logprobs to at least k)" if "max allowed" in detail else ""
            raise FrankError(f"fidelity: the engine answered {response.status_code}{hint}: {detail}")
        rows = response.json()["choices"][0].get("prompt_logprobs")
        if not rows or len(rows) != len(ids):
            raise FrankError(
                f"fidelity: the engine returned {len(rows or [])} prompt positions for a "
                f"{len(ids)}-token prompt (does it support prompt_logprobs?)"
            )
        out.extend({int(tok): float(entry["logprob"]) for tok, entry in row.items()} for row in rows[1:])
        if on_document:
            on_document(n + 1)
    return out


def top_k_arrays(candidate: Candidate, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A candidate's own top k as [positions, k] arrays (dropping the extra actual token), so one engine start
    can stand as the reference for another (the engine floor)."""
    ids = np.zeros((len(candidate), k), dtype=np.int64)
    lps = np.zeros((len(candidate), k), dtype=np.float64)
    for i, row in enumerate(candidate):
        best = sorted(row.items(), key=lambda item: -item[1])[:k]
        if len(best) < k:
            raise FrankError(f"fidelity: position {i} has {len(best)} log-probabilities, expected {k}")
        ids[i], lps[i] = [t for t, _ in best], [lp for _, lp in best]
    return ids, lps
