"""The CPU-expert pool's identification and the CPU-expert decode wait, on numbers (the real engine's pool
is checked in tests/integration/test_llamacpp_moe_engine.py)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from frank.engine import cpu_pool, measures
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
    from frank.workloads.record import draw_totals

    def rec(rid: str, wait: float | None, steps: float | None) -> dict:
        server = {"attributed": True, "decode_s": 0.1, "decode_steps": steps, "cpu_expert_wait_s": wait}
        return {"id": rid, "status": "ok", "server": server}

    records = [rec("a", 0.3, 60), rec("b", 0.1, None), rec("c", None, 40)]  # b: summed, not in the ratio
    t = draw_totals("d", ["a", "b", "c"], records)
    assert t.cpu_expert_wait_s == pytest.approx(0.4) and t.cpu_expert_wait_step_s == pytest.approx(0.005)
    none = draw_totals("d", ["a"], [rec("a", None, 3)])
    assert (none.cpu_expert_wait_s, none.cpu_expert_wait_step_s) == (None, None)


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
    threads = {os.getpid(): {os.getpid(): 1.0}}
    assert tracker.update(os.getpid(), stat.start_ticks, threads, 1.0) is None  # pytest is no llama.cpp
    assert not ep.PoolProbe(os.getpid()).active and ep.PoolProbe(None).read() is None


# A process shaped like frank's exllamav3 server (exllamav3 itself cannot run without CUDA; the real one's pool
# is read on the GPU machine: docs/gpu-run.md): its command line names the server module, and it spawns one
# child (multiprocessing's spawn, as exllamav3's CPU MoE host does) whose threads spin like the C++ pool's.
EXL3_SHAPED = """
import multiprocessing, sys, threading, time

def spin(stop):
    while not stop.is_set():
        pass

def cpu_moe_worker(n):
    stop = threading.Event()
    for _ in range(n):
        threading.Thread(target=spin, args=(stop,), daemon=True).start()
    time.sleep(120)

if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=cpu_moe_worker, args=(3,), daemon=True)
    child.start()
    print(child.pid, flush=True)
    sys.stdin.read()
"""


def test_exllamav3s_pool_is_its_spawned_workers_busiest_threads_sized_by_its_environment(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "exl3_shaped.py"
    script.write_text(EXL3_SHAPED)
    env = {**os.environ, "EXL3_MOE_CPU_THREADS": "3"}
    server = subprocess.Popen(
        [sys.executable, str(script), ep.EXL3_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
    )
    worker = None
    try:
        assert server.stdout is not None
        worker = int(server.stdout.readline())
        # a child between its fork and its exec has an empty command line: the sampler finds the worker at a
        # later tick, and so does this (on a loaded machine 8 of 40 such reads came right after the spawn)
        deadline = time.monotonic() + 10
        while ep.exl3_worker(server.pid) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ep.is_exl3(ep.read_cmdline(server.pid)) and ep.exl3_worker(server.pid) == worker
        source = ep.pool_source(server.pid)
        assert source is not None and (source.pid, source.size, source.size_from) == (worker, 3, "EXL3_MOE_CPU_THREADS")
        tracker, stat = ep.PoolTracker(), procfs.proc_stat(server.pid)
        assert stat is not None
        # the sampler has listed only the server so far: the tracker reads the worker's threads itself
        pool = None
        for _ in range(3):
            pool = tracker.update(server.pid, stat.start_ticks, {server.pid: procfs.thread_runtimes(server.pid)}, 0.3)
            time.sleep(0.3)
        assert pool is not None and pool.size == 3 and pool.spin_parked and "EXL3_MOE_CPU_THREADS" in pool.identified_by
        assert {t.tid for t in pool.threads} <= set(procfs.thread_runtimes(worker))  # the worker's, not the server's
        assert [t.role for t in pool.threads] == ["main", "worker", "worker"] and pool.cpu_percent > 0
        probe = ep.PoolProbe(server.pid)
        assert probe.active and probe.spin_parked and probe.size == 3
        point = probe.read()
        assert point is not None and set(point[1]) == set(procfs.thread_runtimes(worker))
        without = ep.exl3_pool_size({"EXL3_MOE_HOST_CORES": "1"})
        assert without == (max(1, cpu_pool.physical_cores() - 1), "physical cores less EXL3_MOE_HOST_CORES")
    finally:
        if worker is not None:
            os.kill(worker, 9)  # a killed parent does not take its spawned child with it
        server.kill()
        server.wait(timeout=10)
