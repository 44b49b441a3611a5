"""The engine measured without a reference model, for a design's `[fidelity] reference = "control"`.

A model with no transformers checkpoint (frank-moe-gpu: its float32 experts would be 19 GB) cannot be
measured against its reference implementation. What can be measured is how far a configuration moves the
engine's distribution from another configuration's: the engine tokenizes each document itself (its kind's
`/tokenize`, frank.fidelity.candidate.engine_tokenize), the IDs are cut to the set's max_tokens, and the
same teacher-forced top k as a reference run (`engine_logprobs`) is taken on them. No KL is computed here:
at evaluation one control start's top k stands as the reference of every other start
(frank.experiments.fidelity). `tokens_sha256` names exactly which IDs were scored, so a start that scored
other tokens cannot pass as one that scored these.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from frank.errors import FrankError
from frank.fidelity.candidate import Candidate, engine_logprobs, engine_tokenize
from frank.fidelity.measure import TOP_K
from frank.fidelity.runs import Progress, Target, load_sets, target_client
from frank.fidelity.sets import TextSet


def tokens_sha256(documents: Iterable[list[int]]) -> str:
    """The identity of a set's scored token IDs: every document's IDs, in order, with its length."""
    digest = hashlib.sha256()
    for ids in documents:
        digest.update(f"{len(ids)}:{','.join(map(str, ids))}\n".encode())
    return digest.hexdigest()


def engine_documents(client, target: Target, text_set: TextSet) -> list[list[int]]:
    """Each document as the engine tokenizes it, cut to the set's max_tokens."""
    out = []
    for doc in text_set.documents:
        ids = engine_tokenize(client, target.url, target.served_model, doc.text, kind=target.kind)
        ids = ids[: text_set.max_tokens]
        if len(ids) < 2:
            raise FrankError(f"fidelity set {text_set.name}: document {doc.id!r} is fewer than 2 tokens on the engine")
        out.append(ids)
    return out


def measure_engine(
    target: Target, set_specs: Iterable[str], *, k: int = TOP_K, progress: Progress | None = None
) -> list[tuple[dict[str, Any], Candidate]]:
    """Per set: its entry (name, positions, documents, set_sha256, tokens_sha256; kl None) and the engine's
    top k at every scored position of the engine's own tokens."""
    out = []
    with target_client(target) as client:
        for text_set in load_sets(set_specs):
            if progress:
                progress(f"{text_set.name}: {len(text_set.documents)} documents through the engine ({target.kind})")
            docs = engine_documents(client, target, text_set)
            cand = engine_logprobs(client, target.url, target.served_model, docs, k, kind=target.kind)
            entry = {
                "name": text_set.name,
                "kl": None,
                "positions": len(cand),
                "documents": len(docs),
                "set_sha256": text_set.sha256,
                "tokens_sha256": tokens_sha256(docs),
            }
            out.append((entry, cand))
    return out
