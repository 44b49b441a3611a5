"""The CPU-expert pool's identification and the CPU-expert decode wait, on numbers (the real engine's pool
is checked in tests/integration/test_llamacpp_moe_engine.py)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from frank.engine import measures
from frank.telemetry import expert_pool as ep
from frank.telemetry import procfs


def test_pool_size_comes_from_the_batch_flag_first():
    assert ep.pool_size(["llama-server", "-t", "4", "-tb", "8"]) == (8, "-tb")
    assert ep.pool_size(["llama-server", "--threads", "6"]) == (6, "--threads")
    assert ep.pool_size(["llama-server", "--threads-batch", "x", "-t", "3"]) == (3, "-t")
    n, source = ep.pool_size(["llama-server"])
    assert source == "physical cores" and n >= 1
    assert ep.is_llamacpp(["/opt/bin/llama-server", "-m", "x"])
    assert ep.is_llamacpp(["/venv/bin/python", "-m", "frank.engine.xllamacpp_server"])
    assert not ep.is_llamacpp(["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"])


def test_split_pool_ranks_by_cpu_then_lifetime_and_drops_threads_that_never_ran():
    main, workers = ep.split_pool({10: 5.0, 11: 4.9, 12: 0.1, 13: 4.8}, 3)
    assert (main, workers) == (10, [11, 13])  # the HTTP thread (12) is not among the 3 busiest
    main, workers = ep.split_pool({10: 0.0, 11: 0.0, 12: 0.0}, 2, {10: 0.0, 11: 3.0, 12: 1.0})
    assert (main, workers) == (11, [12])  # idle since first seen: the lifetime breaks the tie
    assert ep.split_pool({1: 0.0}, 2) == (None, [])


def test_worker_cpu_leaves_the_main_loop_out_and_counts_new_threads_from_zero():
    before = {1: 10.0, 2: 3.0, 3: 3.0, 4: 0.5}
    after = {1: 10.9, 2: 3.4, 3: 3.38, 4: 0.51, 5: 0.39}
    assert ep.worker_cpu(before, after, 4) == pytest.approx([0.4, 0.39, 0.38])


def test_the_decode_window_starts_where_the_engine_says_its_decode_began():
    probe = ep.PoolProbe(None)
    probe.size = 3  # main + 2 workers
    # main (1) busy throughout; worker 2 busy only in the decode (from t = 1.0); worker 3 busy throughout
    timeline = [(t, {1: t, 2: max(0.0, t - 1.0), 3: 0.5 * t}) for t in (0.0, 0.5, 1.0, 1.5, 2.0)]
    assert probe.decode_window(timeline, 1.0) == pytest.approx([1.0, 0.5])  # the engine decoded the last second
    # the decode began at t = 0.9, between the reads at 0.5 and 1.0: interpolated there
    assert probe.decode_window(timeline, 1.1) == pytest.approx([1.0, 0.55])
    assert probe.decode_window(timeline[:1], 1.0) is None and probe.decode_window(timeline, None) is None
    assert probe.decode_window(timeline, 5.0) == pytest.approx([1.0, 1.0])  # clamped to the first read


def test_the_measures():
    assert measures.llamacpp_decode_steps(64, 10) == 53.0 and measures.llamacpp_decode_steps(1, 0) == 0.0
    assert measures.llamacpp_decode_steps(None, 3) is None
    assert measures.cpu_expert_wait_s([0.4, 0.2]) == pytest.approx(0.3)
    assert measures.cpu_expert_wait_s([]) is None and measures.cpu_expert_wait_s(None) is None
    assert measures.cpu_expert_wait_per_step(0.3, 60) == pytest.approx(0.005)


def test_thread_runtimes_see_a_busy_thread_to_the_millisecond():
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    worker = threading.Thread(target=spin)
    worker.start()
    try:
        tid = worker.native_id
        before = procfs.thread_runtimes(os.getpid())[tid]
        deadline = time.monotonic() + 10
        while procfs.thread_runtimes(os.getpid())[tid] - before < 0.05:
            assert time.monotonic() < deadline, "the spinning thread accrued no CPU time in 10 s"
            time.sleep(0.01)
    finally:
        stop.set()
        worker.join()
    assert procfs.thread_runtimes(-1) == {}


def test_a_tracker_ignores_engines_that_are_not_llamacpp():
    tracker = ep.PoolTracker()
    stat = procfs.proc_stat(os.getpid())
    assert tracker.update(os.getpid(), stat.start_ticks, {os.getpid(): 1.0}, 1.0) is None  # pytest is no llama.cpp
    assert not ep.PoolProbe(os.getpid()).active and ep.PoolProbe(None).read() is None


def _record(i: int, wait: float | None, steps: float | None) -> dict:
    server = {"attributed": True, "reason": "", "decode_s": 0.5, "decode_steps": steps, "cpu_expert_wait_s": wait}
    return {"id": f"r{i}", "draw": "d", "index": i, "attempt": 1, "status": "ok", "server": server}


def test_a_draws_wait_is_summed_and_taken_per_step_over_the_requests_that_carry_both():
    from frank.workloads.record import draw_totals, start_measures, tallies_of

    records = [_record(0, 0.3, 60), _record(1, 0.1, None), _record(2, 0.2, 40)]
    totals = draw_totals("d", ["r0", "r1", "r2"], records)
    assert totals.cpu_expert_wait_s == pytest.approx(0.6)
    assert totals.cpu_expert_wait_step_s == pytest.approx(0.5 / 100)  # r1 has no step count: not in the ratio
    assert start_measures(tallies_of({"d": records})).cpu_expert_wait_per_step == pytest.approx(0.005)
    vllm = draw_totals("d", ["r0"], [_record(0, None, 10)])  # an engine without the pool: absent, never 0
    assert vllm.cpu_expert_wait_s is None and vllm.cpu_expert_wait_step_s is None
    assert start_measures(tallies_of({"d": [_record(0, None, 10)]})).cpu_expert_wait_per_step is None
