"""The reference side of the fidelity check: the checkpoint's own implementation (Hugging Face transformers,
float32, eager attention, on the CPU), teacher-forced over a text set, keeping the top-k log-probabilities
of every position.

Runs in the engine venv as `python -m frank.fidelity.reference_model SPEC.json`; imports only what that venv has
(torch, transformers, numpy, the standard library). The spec names the model folder, the documents, the
token cap per document, k, the CPU thread count and the output .npz. The output holds:

    token_ids      int64 [T]      every document's token IDs, concatenated (BOS + text, cut at max_tokens)
    doc_offsets    int64 [D+1]    document d is token_ids[doc_offsets[d]:doc_offsets[d+1]]
    top_ids        int32 [P, k]   reference top-k token IDs per scored position, most likely first
    top_logprobs   float64 [P, k] their natural-log probabilities (log-softmax in float64 of float32 logits)

A document of n tokens has n - 1 scored positions (position j predicts token j + 1), in document order.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def run(spec: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(int(spec.get("threads", 1)))
    started = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(spec["model"])
    model = AutoModelForCausalLM.from_pretrained(spec["model"], dtype=torch.float32, attn_implementation="eager")
    model.eval()
    k, cap = int(spec["top_k"]), int(spec["max_tokens"])
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    all_ids, offsets, top_ids, top_lps = [], [0], [], []
    with torch.no_grad():
        for doc in spec["documents"]:
            ids = (bos + tokenizer.encode(doc["text"], add_special_tokens=False))[:cap]
            if len(ids) < 2:
                raise ValueError(f"document {doc['id']!r}: fewer than 2 tokens")
            logits = model(torch.tensor([ids])).logits[0, :-1].to(torch.float64)
            logprobs = torch.log_softmax(logits, dim=-1)
            values, indices = torch.topk(logprobs, k, dim=-1)
            all_ids.extend(ids)
            offsets.append(len(all_ids))
            top_ids.append(indices.to(torch.int32).numpy())
            top_lps.append(values.numpy())
    out = spec["out"]
    tmp = f"{out}.tmp{os.getpid()}.npz"
    np.savez(
        tmp,
        token_ids=np.asarray(all_ids, dtype=np.int64),
        doc_offsets=np.asarray(offsets, dtype=np.int64),
        top_ids=np.concatenate(top_ids),
        top_logprobs=np.concatenate(top_lps),
    )
    os.chmod(tmp, 0o600)
    os.replace(tmp, out)
    return {
        "positions": int(sum(len(t) for t in top_ids)),
        "tokens": len(all_ids),
        "seconds": round(time.monotonic() - started, 3),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "threads": torch.get_num_threads(),
    }


if __name__ == "__main__":
    with open(sys.argv[1]) as handle:
        result = run(json.load(handle))
    print(json.dumps(result))
