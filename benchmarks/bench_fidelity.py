"""Cost of a fidelity run: wall time over the three shipped sets with the reference cached, and its parts.

    .venv/bin/python benchmarks/bench_fidelity.py [--repeat 2] [--json]

Uses the running engine (frank engine status), or starts embedded-cpu and stops it at the end. The first
run fills the reference cache (if it is cold) and is reported apart; then `--repeat` cached runs are timed
whole, and their parts: reference load, the engine's teacher-forced passes (HTTP + vLLM + JSON), and the KL
computation. The KL's cost is also given per scored position, next to a vectorized-numpy peer computing the
same 65-bucket KL on the same arrays (the peer has no miss handling: on a float32 engine there are none),
so the pure-Python loop's share is visible.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from frank.engine.controller import EngineController  # noqa: E402
from frank.fidelity import runs  # noqa: E402
from frank.fidelity.candidate import engine_logprobs  # noqa: E402
from frank.fidelity.measure import TOP_K, mean_kl  # noqa: E402
from frank.fidelity.reference import get_reference, model_fingerprint  # noqa: E402


def vectorized_kl(ref_ids: np.ndarray, ref_lps: np.ndarray, cand: list[dict[int, float]]) -> float:
    """The same measure when no reference token is missing: gather q, then one array expression."""
    q = np.array([[row[i] for i in ids] for ids, row in zip(ref_ids.tolist(), cand)])
    p = np.exp(ref_lps)
    p_tail = -np.expm1(np.logaddexp.reduce(ref_lps, axis=1))
    q_tail = -np.expm1(np.logaddexp.reduce(q, axis=1))
    kl = (p * (ref_lps - q)).sum(axis=1) + p_tail * (np.log(p_tail) - np.log(q_tail))
    return float(kl.mean())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    controller = EngineController()
    started_here = controller.status().state not in ("starting", "ready")
    if started_here:
        print("starting embedded-cpu ...", file=sys.stderr)
        controller.start("embedded-cpu")
    try:
        target = runs.running_target(controller)
        from frank.fidelity.reference import cached_path

        model_sha = model_fingerprint(target.model_dir)
        cold = not all(cached_path(s, model_sha).is_file() for s in runs.load_sets(None))
        t0 = time.perf_counter()
        runs.run_fidelity(target=target, save=False)
        first_s = time.perf_counter() - t0
        whole, parts = [], {"reference_load_s": [], "engine_s": [], "kl_s": [], "kl_vectorized_s": []}
        positions = 0
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            runs.run_fidelity(target=target, save=False)
            whole.append(time.perf_counter() - t0)
            sets = runs.load_sets(None)
            model_sha = model_fingerprint(target.model_dir)
            t = time.perf_counter()
            refs = [get_reference(s, target.model_dir, target.python, model_sha=model_sha) for s in sets]
            parts["reference_load_s"].append(time.perf_counter() - t)
            with runs._client(target) as client:
                t = time.perf_counter()
                cands = [engine_logprobs(client, target.url, target.served_model, r.documents(), TOP_K) for r in refs]
                parts["engine_s"].append(time.perf_counter() - t)
            t = time.perf_counter()
            kls = [mean_kl(r.top_ids, r.top_logprobs, c).kl for r, c in zip(refs, cands)]
            parts["kl_s"].append(time.perf_counter() - t)
            t = time.perf_counter()
            vec = [vectorized_kl(r.top_ids, r.top_logprobs, c) for r, c in zip(refs, cands)]
            parts["kl_vectorized_s"].append(time.perf_counter() - t)
            positions = sum(r.positions for r in refs)
            # at ~1e-15 the two differ by float64 rounding of the tail's logarithm (~1e-18 absolute)
            assert all(abs(a - b) <= 1e-17 + 1e-6 * abs(a) for a, b in zip(kls, vec)), (kls, vec)
    finally:
        if started_here:
            controller.stop()
    med = {k: statistics.median(v) for k, v in parts.items()}
    result = {
        "knobs": target.knobs,
        "sets": 3,
        "positions": positions,
        "first_run_s": round(first_s, 3),
        "first_run_reference_cache": "cold" if cold else "warm",
        "cached_run_s": [round(w, 3) for w in whole],
        "cached_run_median_s": round(statistics.median(whole), 3),
        "parts_median_s": {k: round(v, 4) for k, v in med.items()},
        "kl_us_per_position": round(med["kl_s"] / positions * 1e6, 2),
        "kl_vectorized_us_per_position": round(med["kl_vectorized_s"] / positions * 1e6, 2),
        "engine_ms_per_position": round(med["engine_s"] / positions * 1e3, 3),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"fidelity run over 3 sets, {positions} positions: first (reference cache {result['first_run_reference_cache']}, engine's first requests) "  # noqa: E501
            f"{first_s:.1f} s; cached {', '.join(f'{w:.1f}' for w in whole)} s (median {result['cached_run_median_s']} s)"  # noqa: E501
        )
        print(
            f"  parts (median): reference load {med['reference_load_s']:.3f} s, engine {med['engine_s']:.1f} s, "
            f"KL {med['kl_s']:.3f} s"
        )
        print(
            f"  KL per position: {result['kl_us_per_position']} us (pure Python loop) vs "
            f"{result['kl_vectorized_us_per_position']} us (vectorized numpy peer, ratio "
            f"{med['kl_s'] / med['kl_vectorized_s']:.1f}x); engine {result['engine_ms_per_position']} ms per position"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
