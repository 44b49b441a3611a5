"""The region cache's first-time encode of full-scale W01 contexts: one thread against the threaded split.

vLLM runs the tokenizer with TOKENIZERS_PARALLELISM=false, so run this the same way:

    TOKENIZERS_PARALLELISM=false .venv/bin/python benchmarks/bench_region_cache_encode_threads.py

Six 600 KB contexts (one per W01 text kind), chunked as the cache chunks them, encoded as six fresh
conversations; arms alternate 1, 2, 2, 1 threads, three rounds; the IDs of both arms must be identical.
"""

from __future__ import annotations

import random
import statistics
import time

from frank import paths
from frank.plugins.region_cache import core
from frank.workloads import w01


def main() -> None:
    tok_json = (paths.models_dir() / "tiny-frank" / "tokenizer.json").read_text()
    rng = random.Random(7)
    kinds = (list(w01._LINES) * 6)[:6]
    chunked = [core.chunk_region(w01._text(rng, kind, 600_000)) for kind in kinds]
    seconds: dict[int, list[float]] = {1: [], 2: []}
    reference = None
    for _ in range(3):
        for threads in (1, 2, 2, 1):
            core.ENCODE_THREADS = threads
            encode = core._fast_batch_encoder(tok_json)
            t0 = time.perf_counter()
            out = [encode(chunks) for chunks in chunked]
            seconds[threads].append(time.perf_counter() - t0)
            reference = reference or out
            assert out == reference, "threaded encode changed the token IDs"
    for threads, values in seconds.items():
        print(
            f"{threads} thread(s): median {statistics.median(values) / len(chunked) * 1000:.1f} ms per "
            f"fresh conversation ({len(values)} rounds)"
        )
    print("chunks per conversation:", [len(c) for c in chunked])


if __name__ == "__main__":
    main()
