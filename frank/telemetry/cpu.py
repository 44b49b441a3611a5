"""CPU-pool telemetry: per-core load, host RAM, and the engine's process tree.

The workstation's CPU experts run as threads of the engine, so the engine is shown as its process tree's
CPU use (percent of one core, so 6400 is 64 busy cores), thread count and busiest threads. Rates come from
our own deltas of cumulative CPU times between two samples, so one `CpuSampler` must be used by one thread.

What it reads each sample is kept to what can have changed (procfs.py: one /proc read per fact):
- per core and RAM: /proc/stat and /proc/meminfo (psutil where they cannot be read); from the same /proc/stat
  read, the share of the cores' time the hypervisor stole, and the CPU the other processes used (every
  core's busy time less the engine's tree and this process: for an experiment cell, the runner and its
  replay client);
- the cores' clock: every `freq_refresh_s` only (on x86, reading it can interrupt every core);
- per engine process: its /proc/PID/stat (CPU time, threads, RSS and start time in one read);
- per thread: only while the tree is busy (at least `busy_percent` of one core since the last sample).
  An idle engine's busiest threads are none, and its 70 or 7000 threads are not read every second; a tree
  that turns busy shows its busiest threads from the second busy sample on (a rate needs two reads).
- the tree itself (a scan of every process's parent): every `tree_refresh_s`, doubling while it stays the
  same, up to `tree_refresh_max_s`.
A llama.cpp engine's CPU thread pool (the threads that compute CPU-resident experts) is told apart from its
other threads from the same thread reads, and so is exllamav3's, in its CPU MoE worker process (expert_pool.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psutil

from frank.telemetry import procfs
from frank.telemetry.expert_pool import ExpertPool, PoolTracker

BUSIEST_THREADS = 5
BUSY_PERCENT = 10.0  # of one core: below it the tree is idle and its threads are not read
FREQ_REFRESH_S = 10.0  # the cores' clock is read this often


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
    expert_pool: ExpertPool | None = None  # llama.cpp's or exllamav3's CPU-expert pool; None for other engines


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
    steal_percent: float | None = None  # of all cores' time since the previous sample (None: not readable)
    # CPU the other processes used since the previous sample, percent of one core: every core's busy time less
    # the engine's tree and this process (None on the first sample, or without /proc/stat)
    others_percent: float | None = None
    self_percent: float | None = None  # this process (a console, or an experiment cell's runner and client)
    cpu_mhz: float | None = None  # the cores' mean clock (read every FREQ_REFRESH_S)
    cpu_mhz_source: str = ""  # "cpufreq" | "cpuinfo", or why there is none


class CpuSampler:
    def __init__(
        self,
        tree_refresh_s: float = 5.0,
        busiest: int = BUSIEST_THREADS,
        busy_percent: float = BUSY_PERCENT,
        tree_refresh_max_s: float = 60.0,
        freq_refresh_s: float = FREQ_REFRESH_S,
    ) -> None:
        self.tree_refresh_s = tree_refresh_s
        self.freq_refresh_s = freq_refresh_s
        self._freq: tuple[float, float | None, str] | None = None  # (read at, MHz, source)
        self._self_cpu = (time.monotonic(), procfs.self_cpu_s())
        self.tree_refresh_max_s = max(tree_refresh_s, tree_refresh_max_s)
        self.busiest = busiest
        self.busy_percent = busy_percent
        self._cores = procfs.core_ticks()
        if self._cores is None:
            psutil.cpu_percent(percpu=True)  # prime: the next call measures since now
        self._root: tuple[int, int] | None = None  # (pid, start ticks)
        self._tree: tuple[int, ...] = ()
        self._tree_at = 0.0
        self._tree_every = tree_refresh_s
        self._prev_t: float | None = None
        self._prev_proc: dict[int, float] = {}  # pid -> cumulative cpu seconds
        self._prev_threads: dict[tuple[int, int], float] = {}  # (pid, tid) -> cpu seconds, at the last sample
        self._pool = PoolTracker()
        self._cpu_count = psutil.cpu_count() or 1  # a tree's ceiling
        self._engine_used: float | None = None  # the engine tree's CPU seconds since the last sample

    def sample(self, engine_pid: int | None) -> CpuSample:
        t0 = time.perf_counter()
        per_core, steal, host_busy_s = self._per_core()
        mem = procfs.memory()
        if mem is None:
            vm = psutil.virtual_memory()
            mem = (vm.total, vm.available)
        total, available = mem
        self._engine_used = None
        engine, error = (None, "no engine process") if engine_pid is None else self._engine(engine_pid)
        others, own = self._others(host_busy_s, engine_pid is not None)
        mhz, source = self._mhz()
        return CpuSample(
            per_core=per_core,
            total_percent=sum(per_core) / len(per_core) if per_core else 0.0,
            ram_total=total,
            ram_used=total - available,
            ram_available=available,
            engine=engine,
            engine_error=error,
            cost_s=time.perf_counter() - t0,
            steal_percent=steal,
            others_percent=others,
            self_percent=own,
            cpu_mhz=mhz,
            cpu_mhz_source=source,
        )

    def _mhz(self) -> tuple[float | None, str]:
        now = time.monotonic()
        if self._freq is None or now - self._freq[0] >= self.freq_refresh_s:
            self._freq = (now, *procfs.cpu_mhz())
        return self._freq[1], self._freq[2]

    def _others(self, host_busy_s: tuple[float, float] | None, watching: bool) -> tuple[float | None, float | None]:
        """(the other processes', this process's) CPU since the last sample, percent of one core."""
        now, cpu = time.monotonic(), procfs.self_cpu_s()
        (t0, c0), self._self_cpu = self._self_cpu, (now, cpu)
        own = procfs.busy_percent(cpu - c0, now - t0, self._cpu_count) if now > t0 else None
        if host_busy_s is None or own is None:
            return None, own
        busy_s, dt = host_busy_s
        engine_s = self._engine_used or 0.0
        if watching and self._engine_used is None:  # the engine's first sample: its share is not known yet
            return None, own
        return procfs.busy_percent(busy_s - engine_s - (cpu - c0), dt, self._cpu_count), own

    def engine_pids(self) -> tuple[int, ...]:
        """The engine tree as last seen (for the GPU per-process memory)."""
        return self._tree

    def _per_core(self) -> tuple[tuple[float, ...], float | None, tuple[float, float] | None]:
        """Each core's busy percent, the share of all cores' time stolen (percent), and (busy CPU seconds of
        every core together, the wall seconds they were taken over) since the last sample."""
        now = procfs.core_ticks()
        if now is None:
            return tuple(psutil.cpu_percent(percpu=True)), None, None
        before, self._cores = self._cores, now
        if before is None or len(before) != len(now):
            return tuple(0.0 for _ in now), None, None
        out = []
        for (b0, t0, _), (b1, t1, _) in zip(before, now):
            dt = t1 - t0
            out.append(procfs.busy_percent(b1 - b0, dt) if dt > 0 else 0.0)
        ticks = sum(t1 - t0 for (_, t0, _), (_, t1, _) in zip(before, now))
        if ticks <= 0:
            return tuple(out), None, None
        stolen = sum(s1 - s0 for (_, _, s0), (_, _, s1) in zip(before, now))
        busy = sum(b1 - b0 for (b0, _, _), (b1, _, _) in zip(before, now))
        wall = ticks / len(now) / procfs.CLOCK_TICKS  # each core's ticks cover the same wall time
        return tuple(out), 100.0 * stolen / ticks, (busy / procfs.CLOCK_TICKS, wall)

    def _refresh_tree(self, pid: int, root: procfs.ProcStat, now: float) -> None:
        if self._root != (pid, root.start_ticks):  # a new engine (or the pid reused): start over
            self._root = (pid, root.start_ticks)
            self._tree, self._tree_at, self._tree_every = (pid,), 0.0, self.tree_refresh_s
            self._prev_t = None
            self._prev_proc.clear()
            self._prev_threads.clear()
        if now - self._tree_at < self._tree_every:
            return
        try:
            children = tuple(c.pid for c in psutil.Process(pid).children(recursive=True))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            children = ()
        tree = (pid, *children)
        unchanged = tree == self._tree
        self._tree, self._tree_at = tree, now
        self._tree_every = min(self.tree_refresh_max_s, self._tree_every * 2) if unchanged else self.tree_refresh_s

    def _engine(self, pid: int) -> tuple[EngineProcesses | None, str | None]:
        now = time.monotonic()
        root = procfs.proc_stat(pid)
        if root is None:
            self._root, self._tree = None, ()
            return None, f"engine process {pid} is gone"
        self._refresh_tree(pid, root, now)
        stats = {pid: root}
        for child in self._tree[1:]:
            stat = procfs.proc_stat(child)
            if stat is not None:
                stats[child] = stat
        self._tree = tuple(stats)
        proc_cpu = {p: s.cpu_s for p, s in stats.items()}
        dt = None if self._prev_t is None else now - self._prev_t
        cpu_percent = None
        if dt and dt > 0:
            # a process first seen now counts from the next sample (its lifetime total is no rate)
            used = sum(v - self._prev_proc[p] for p, v in proc_cpu.items() if p in self._prev_proc)
            cpu_percent = procfs.busy_percent(used, dt, self._cpu_count)
            self._engine_used = used
        busiest: list[ThreadUse] = []
        pool_threads: dict[int, dict[int, float]] | None = None
        if cpu_percent is None or cpu_percent >= self.busy_percent:
            threads = {(p, tid): t for p in stats for tid, t in procfs.thread_stats(p).items()}
            if dt and dt > 0 and self._prev_threads:
                deltas = sorted(
                    ((t.cpu_s - self._prev_threads[k], k) for k, t in threads.items() if k in self._prev_threads),
                    reverse=True,
                )
                busiest = [
                    ThreadUse(tid, p, threads[(p, tid)].name, procfs.busy_percent(d, dt))
                    for d, (p, tid) in deltas[: self.busiest]
                    if d > 0
                ]
            self._prev_threads = {k: t.cpu_s for k, t in threads.items()}
            pool_threads = {p: {} for p in stats}
            for (p, tid), t in threads.items():
                pool_threads[p][tid] = t.cpu_s
        else:
            self._prev_threads = {}  # idle: no thread baseline to keep fresh
        pool = self._pool.update(pid, root.start_ticks, pool_threads, dt)
        self._prev_t = now
        self._prev_proc = proc_cpu
        return (
            EngineProcesses(
                pid,
                self._tree,
                cpu_percent,
                sum(s.num_threads for s in stats.values()),
                sum(s.rss_bytes for s in stats.values()),
                tuple(busiest),
                pool,
            ),
            None,
        )
