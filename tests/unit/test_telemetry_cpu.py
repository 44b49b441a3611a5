"""frank.engine.telemetry.cpu on real processes: a child with one busy thread stands in for the engine's expert pool."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from frank.engine.telemetry.cpu import CpuSampler

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

    s = CpuSampler(tree_refresh_s=0.0)
    first = s.sample(os.getpid())
    assert first.engine.cpu_percent is None  # no rate from one read
    time.sleep(0.6)
    x = s.sample(os.getpid())
    eng = x.engine
    assert busy_child.pid in eng.pids and os.getpid() == eng.pid
    assert eng.num_threads >= 5 and eng.rss_bytes > 0
    assert eng.cpu_percent > 30  # one spinning thread (on a shared 2-core box it gets well over a third)
    top = eng.busiest[0]
    assert top.pid == busy_child.pid and top.name == "expert-pool" and top.cpu_percent > 30
    # process and thread times are separate /proc reads of a spinning thread, 10 ms ticks apart at worst:
    # over 0.6 s two ticks are 3.3 points
    assert eng.cpu_percent >= top.cpu_percent - 100 * 0.02 / 0.6


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
