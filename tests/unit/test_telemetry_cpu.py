"""frank.telemetry.cpu on real processes: a child with one busy thread stands in for the engine's expert pool."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time

import psutil
import pytest

from frank.telemetry.cpu import CpuSampler

BUSY_CHILD = """
import ctypes, threading, time
def spin():
    # name the OS thread, as native pools do (Python 3.11 does not)
    ctypes.CDLL(None).prctl(15, b"expert-pool", 0, 0, 0)  # PR_SET_NAME
    x = 0
    end = time.monotonic() + 30
    while time.monotonic() < end:
        x += 1
t = threading.Thread(target=spin, name="expert-pool")
t.start()
for _ in range(3):
    threading.Thread(target=time.sleep, args=(30,)).start()
print("ready", flush=True)
t.join()
"""


@pytest.fixture
def busy_child():
    proc = subprocess.Popen([sys.executable, "-c", BUSY_CHILD], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    yield proc
    proc.kill()
    proc.wait()


def test_host_cpu_and_ram():
    s = CpuSampler()
    time.sleep(0.2)
    x = s.sample(None)
    assert len(x.per_core) == psutil.cpu_count() and all(0 <= v <= 100 for v in x.per_core)
    assert 0 < x.ram_used < x.ram_total and x.engine is None and x.engine_error == "no engine process"


def test_engine_tree_threads_and_busiest_thread(busy_child):
    # the child is watched through its parent (this test process): the tree includes it
    import os

    child = psutil.Process(busy_child.pid)
    s = CpuSampler(tree_refresh_s=0.0)
    first = s.sample(os.getpid())
    before, t0 = sum(child.cpu_times()[:2]), time.monotonic()
    assert first.engine.cpu_percent is None  # no rate from one read
    time.sleep(0.6)
    x = s.sample(os.getpid())
    spun = 100 * (sum(child.cpu_times()[:2]) - before) / (time.monotonic() - t0)  # what psutil saw it use
    eng = x.engine
    assert busy_child.pid in eng.pids and os.getpid() == eng.pid
    assert eng.num_threads >= 5 and eng.rss_bytes > 0
    assert spun > 5, "the spinning child got no CPU at all"  # a loaded 2-core box gives it less than a core
    top = eng.busiest[0]
    assert top.pid == busy_child.pid and top.name == "expert-pool"
    # our reads and psutil's are a few ms apart and /proc counts in 10 ms ticks: 0.6 s windows agree to a
    # few points plus what the box's load moves between them
    assert abs(top.cpu_percent - spun) <= 100 * 0.03 / 0.6 + 0.25 * spun
    assert eng.cpu_percent >= top.cpu_percent - 100 * 0.02 / 0.6


IDLE_CHILD = "import time; print('ready', flush=True); time.sleep(30)"


def test_an_idle_tree_is_read_in_one_file_per_process_and_rarely_scanned(monkeypatch):
    from frank.telemetry import procfs

    proc = subprocess.Popen([sys.executable, "-c", IDLE_CHILD], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        thread_reads, scans = [], []
        real_threads, real_children = procfs.thread_stats, psutil.Process.children
        monkeypatch.setattr(procfs, "thread_stats", lambda pid: thread_reads.append(pid) or real_threads(pid))
        monkeypatch.setattr(
            psutil.Process, "children", lambda self, **kw: scans.append(time.monotonic()) or real_children(self, **kw)
        )
        s = CpuSampler(tree_refresh_s=0.2, tree_refresh_max_s=0.8)
        samples = []
        for _ in range(12):
            samples.append(s.sample(proc.pid))
            time.sleep(0.1)
        eng = samples[-1].engine
        assert eng.pid == proc.pid and eng.num_threads >= 1 and eng.cpu_percent < 10
        assert thread_reads == [proc.pid]  # only the first sample (no rate yet says nothing of idleness)
        assert all(x.engine.busiest == () for x in samples)
        gaps = [round(b - a, 1) for a, b in zip(scans, scans[1:])]
        assert len(scans) <= 4 and gaps == sorted(gaps), gaps  # 0.2 s, then 0.4 s, then 0.8 s at most
    finally:
        proc.kill()
        proc.wait()


def test_engine_gone(busy_child):
    s = CpuSampler()
    assert s.sample(busy_child.pid).engine is not None
    busy_child.kill()
    busy_child.wait()
    x = s.sample(busy_child.pid)
    assert x.engine is None and "is gone" in x.engine_error
    assert s.sample(busy_child.pid).engine_error.endswith("is gone")  # stays quiet


def test_a_new_engine_pid_starts_fresh(busy_child):
    import os

    s = CpuSampler()
    s.sample(os.getpid())
    time.sleep(0.1)
    x = s.sample(busy_child.pid)
    assert x.engine.pid == busy_child.pid and x.engine.cpu_percent is None  # no rate across two engines


def test_tick_rounded_reads_over_a_short_interval_never_read_above_the_cores(monkeypatch, busy_child):
    """CPU times come in 10 ms ticks: two reads 20 ms apart can show a tick too many per process and per
    thread (241% on a 2-core machine was seen in CI). A rate is capped at what the cores can give."""
    from frank.telemetry import procfs

    real_stat, real_threads = procfs.proc_stat, procfs.thread_stats
    extra = {"s": 0.0}  # what the next read adds: 5 ticks, as if rounding had put them all in this interval

    def stat(pid, tid=None):
        got = real_stat(pid, tid)
        return got if got is None else dataclasses.replace(got, cpu_s=got.cpu_s + extra["s"])

    def threads(pid):
        return {tid: dataclasses.replace(t, cpu_s=t.cpu_s + extra["s"]) for tid, t in real_threads(pid).items()}

    monkeypatch.setattr(procfs, "proc_stat", stat)
    monkeypatch.setattr(procfs, "thread_stats", threads)
    s = CpuSampler()
    s.sample(busy_child.pid)
    time.sleep(0.3)
    assert s.sample(busy_child.pid).engine.cpu_percent > 10  # busy: its threads are read, a baseline kept
    extra["s"] = 0.05 * psutil.cpu_count()
    eng = s.sample(busy_child.pid).engine
    assert eng.cpu_percent == 100.0 * psutil.cpu_count()
    assert eng.busiest and all(t.cpu_percent <= 100.0 for t in eng.busiest)
    assert max(t.cpu_percent for t in eng.busiest) == 100.0
