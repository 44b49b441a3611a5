"""FRANK_EXL3_CORE_ORDER=python in both of exllamav3's processes: the server, and the CPU MoE worker it spawns,
which imports the server's module as __mp_main__ before exllamav3's moe_cpu_host. exllamav3 cannot run here
(it needs CUDA), so a stand-in package named `exllamav3` gives the one fault the real one gave on the H200
machine and cannot give here on demand: an extension whose exl3_moe_cpu_core_order() dies with SIGSEGV."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CRASHING_EXT = """
import os, signal, types
exllamav3_ext = types.ModuleType("exllamav3_ext")
def _crash():  # the H200 machine's crash, on demand
    os.kill(os.getpid(), signal.SIGSEGV)
exllamav3_ext.exl3_moe_cpu_core_order = _crash
"""
# as exllamav3 1.6.5's model/moe_cpu_host.py: the core order asked at import (MoeCpuTuning), the worker spawned
MOE_CPU_HOST = """
from ..ext import exllamav3_ext as ext
ORDER, N_PHYS = ext.exl3_moe_cpu_core_order()
def worker(queue):
    queue.put(("worker", N_PHYS))
"""
# the server's main: its module imported first, then exllamav3's CPU host, then the spawned worker
DRIVER = """
import frank.engine.exl3.server  # noqa: F401  (in the worker too: this file is its __mp_main__)
if __name__ == "__main__":
    import multiprocessing
    from exllamav3.model import moe_cpu_host
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=moe_cpu_host.worker, args=(queue,))
    child.start()
    child.join(60)
    print("server", moe_cpu_host.N_PHYS, "worker", queue.get(timeout=5)[1] if child.exitcode == 0 else child.exitcode)
"""


@pytest.fixture
def crashing_exllamav3(tmp_path) -> Path:
    pkg = tmp_path / "exllamav3"
    (pkg / "model").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ext.py").write_text(textwrap.dedent(CRASHING_EXT))
    (pkg / "model" / "__init__.py").write_text("")
    (pkg / "model" / "moe_cpu_host.py").write_text(textwrap.dedent(MOE_CPU_HOST))
    (tmp_path / "driver.py").write_text(textwrap.dedent(DRIVER))
    return tmp_path


def run_driver(folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "FRANK_EXL3_CORE_ORDER"}
    environ.update(env, PYTHONPATH=f"{folder}{os.pathsep}{REPO}")
    return subprocess.run([sys.executable, str(folder / "driver.py")], capture_output=True, text=True, env=environ,
                          timeout=120)  # fmt: skip


def test_without_the_stand_in_the_crash_happens_at_import(crashing_exllamav3):
    ran = run_driver(crashing_exllamav3)
    assert ran.returncode == -signal.SIGSEGV, ran.stderr


def test_with_it_the_server_and_its_spawned_worker_read_the_topology_in_python(crashing_exllamav3):
    from frank.engine.exl3.core_order import python_core_order

    ran = run_driver(crashing_exllamav3, FRANK_EXL3_CORE_ORDER="python")
    assert ran.returncode == 0, ran.stderr
    n_phys = python_core_order()[1]
    assert ran.stdout.split() == ["server", str(n_phys), "worker", str(n_phys)]
