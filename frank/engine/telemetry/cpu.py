"""CPU-pool telemetry through psutil: per-core load, host RAM, and the engine's process tree.

The workstation's CPU experts run as threads of the engine, so the engine is shown as its process tree's
CPU use (percent of one core, so 6400 is 64 busy cores), thread count and busiest threads. Rates come from
our own deltas of cumulative CPU times between two samples, so one `CpuSampler` must be used by one thread.
The children of the engine are looked up again only every `tree_refresh_s` (a /proc scan), not every second.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import psutil

BUSIEST_THREADS = 5


@dataclass(frozen=True)
class ThreadUse:
    tid: int
    pid: int
    name: str
    cpu_percent: float  # of one core


@dataclass(frozen=True)
class EngineProcesses:
    pid: int  # the root (API server)
    pids: tuple[int, ...]  # the tree
    cpu_percent: float | None  # of one core, the whole tree; None on the first sample
    num_threads: int
    rss_bytes: int
    busiest: tuple[ThreadUse, ...]


@dataclass(frozen=True)
class CpuSample:
    per_core: tuple[float, ...]  # percent per logical core since the previous sample
    total_percent: float  # mean over cores
    ram_total: int
    ram_used: int
    ram_available: int
    engine: EngineProcesses | None
    engine_error: str | None  # why there is no engine data (no pid, process gone, access denied)
    cost_s: float


def _thread_name(pid: int, tid: int) -> str:
    try:
        return Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
    except OSError:
        return "?"


class CpuSampler:
    def __init__(self, tree_refresh_s: float = 5.0, busiest: int = BUSIEST_THREADS) -> None:
        self.tree_refresh_s = tree_refresh_s
        self.busiest = busiest
        psutil.cpu_percent(percpu=True)  # prime: the next call measures since now
        self._root: psutil.Process | None = None
        self._tree: list[psutil.Process] = []
        self._tree_at = 0.0
        self._prev_t: float | None = None
        self._prev_proc: dict[int, float] = {}  # pid -> cumulative cpu seconds
        self._prev_threads: dict[tuple[int, int], float] = {}  # (pid, tid) -> cumulative cpu seconds

    def sample(self, engine_pid: int | None) -> CpuSample:
        t0 = time.perf_counter()
        per_core = tuple(psutil.cpu_percent(percpu=True))
        vm = psutil.virtual_memory()
        engine, error = (None, "no engine process") if engine_pid is None else self._engine(engine_pid)
        return CpuSample(
            per_core=per_core,
            total_percent=sum(per_core) / len(per_core) if per_core else 0.0,
            ram_total=vm.total,
            ram_used=vm.total - vm.available,
            ram_available=vm.available,
            engine=engine,
            engine_error=error,
            cost_s=time.perf_counter() - t0,
        )

    def engine_pids(self) -> tuple[int, ...]:
        """The engine tree as last seen (for the GPU per-process memory)."""
        return tuple(p.pid for p in self._tree)

    def _refresh_tree(self, pid: int, now: float) -> None:
        if self._root is None or self._root.pid != pid or not self._root.is_running():
            self._root = psutil.Process(pid)
            self._tree_at = 0.0
            self._prev_t = None
            self._prev_proc.clear()
            self._prev_threads.clear()
        if now - self._tree_at >= self.tree_refresh_s:
            try:
                children = self._root.children(recursive=True)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                children = []
            # keep the Process objects we already have: psutil caches their create time
            known = {p.pid: p for p in self._tree}
            self._tree = [self._root] + [known.get(c.pid, c) for c in children]
            self._tree_at = now

    def _engine(self, pid: int) -> tuple[EngineProcesses | None, str | None]:
        now = time.monotonic()
        try:
            self._refresh_tree(pid, now)
        except psutil.NoSuchProcess:
            self._root, self._tree = None, []
            return None, f"engine process {pid} is gone"
        except psutil.AccessDenied:
            return None, f"engine process {pid}: access denied"
        proc_cpu: dict[int, float] = {}
        thread_cpu: dict[tuple[int, int], float] = {}
        rss = 0
        nthreads = 0
        alive: list[psutil.Process] = []
        for proc in self._tree:
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    rss += proc.memory_info().rss
                    threads = proc.threads()
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
            except psutil.AccessDenied:
                alive.append(proc)
                continue
            alive.append(proc)
            proc_cpu[proc.pid] = times.user + times.system
            nthreads += len(threads)
            for th in threads:
                thread_cpu[(proc.pid, th.id)] = th.user_time + th.system_time
        self._tree = alive
        if not alive:
            return None, f"engine process {pid} is gone"
        dt = None if self._prev_t is None else now - self._prev_t
        cpu_percent = None
        busiest: list[ThreadUse] = []
        if dt and dt > 0:
            # a process or thread first seen now counts from the next sample (its lifetime total is no rate)
            used = sum(v - self._prev_proc[p] for p, v in proc_cpu.items() if p in self._prev_proc)
            cpu_percent = max(0.0, 100.0 * used / dt)
            deltas = sorted(
                ((v - self._prev_threads[k], k) for k, v in thread_cpu.items() if k in self._prev_threads), reverse=True
            )
            busiest = [
                ThreadUse(tid, p, _thread_name(p, tid), max(0.0, 100.0 * d / dt))
                for d, (p, tid) in deltas[: self.busiest]
                if d > 0
            ]
        self._prev_t = now
        self._prev_proc = proc_cpu
        self._prev_threads = thread_cpu
        return EngineProcesses(pid, tuple(p.pid for p in alive), cpu_percent, nthreads, rss, tuple(busiest)), None
