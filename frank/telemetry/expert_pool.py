"""llama.cpp's CPU thread pool (the threads that compute CPU-resident experts), told apart from its other threads.

llama.cpp names none of its threads (every one is `llama-server`, or `python` under xllamacpp), so the pool is
found by what it does: its threads compute every CPU op of every step, so while the engine decodes they are
the busiest threads of the process. The pool has n threads, n being the engine's own `-tb/--threads-batch`
(a verify step is a batch), else `-t/--threads`, read from its command line (else llama.cpp's default, the
physical cores). Of those n, the busiest is the pool's thread 0: llama.cpp's main loop, which computes its
share of each CPU op in the caller's thread and also samples, drafts, streams and (on a GPU) waits for the
device; the other n-1 are its workers, which only compute. HTTP threads parse requests and write tokens:
a small fraction of a core.

Membership is the n threads with the most CPU time since the tracker first saw the engine (so CPU spent
loading the model before that does not count), ties (an engine idle since) broken by CPU time over the
thread's life; it holds steady across samples. Under xllamacpp the process's own main thread is Python
waiting for a signal, never the pool. An idle engine's threads are not read (as in cpu.py): its pool is
reported with the threads it had, each at 0%.

exllamav3 (frank's exl3 engines) computes its CPU experts in another process: one spawned child of the server
(exllamav3/model/moe_cpu_host.py) owns the CPU experts and runs a C++ pool whose dispatching thread is its
worker 0 ("main" here). The pool is that child's n busiest threads, n its EXL3_MOE_CPU_THREADS (read from the
server's environment), else exllamav3's default: the physical cores less EXL3_MOE_HOST_CORES. Its workers
spin (65536 pauses) before they nap 50 us, so between a verify step's jobs they burn CPU waiting: its busy
share and the wait read from it are upper bounds (ExpertPool.spin_parked), which the engine log's
EXL3_MOE_CPU_PROF / EXL3_SPLIT_PROF figures cross-check. No child (cpu_split 0): no pool. Other engines
have no such pool (None).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from frank.engine import cpu_pool
from frank.telemetry import procfs

LLAMACPP_MARKERS = ("llama-server", "xllamacpp_server")
THREAD_FLAGS = (("-tb", "--threads-batch"), ("-t", "--threads"))
EXL3_SERVER = "frank.engine.exl3.server"
SPAWN_MARKER = (
    "spawn_main"  # multiprocessing's spawned child: `python -c "from multiprocessing.spawn import spawn_main; ..."`
)
LLAMACPP_IDENTIFIED_BY = "the n busiest threads of the engine since first seen (n from its command line)"
EXL3_IDENTIFIED_BY = (
    "the n busiest threads of exllamav3's CPU MoE worker process since first seen (n from EXL3_MOE_CPU_THREADS)"
)


@dataclass(frozen=True)
class PoolThread:
    tid: int
    role: str  # "main" (the pool's thread 0: llama.cpp's main loop) or "worker"
    busy_pct: float  # of one core, over the last sample
    cpu_s: float  # CPU seconds since the tracker first saw it


@dataclass(frozen=True)
class ExpertPool:
    size: int  # the pool's threads (n)
    size_from: str  # where n came from: the flag, or "physical cores" (llama.cpp's default)
    threads: tuple[PoolThread, ...]  # main first, then the workers, busiest first
    busy_pct: float  # the pool's share: its threads' CPU over n cores (0-100)
    workers_busy_pct: float | None  # the workers' mean busy percent (None: a pool of one thread)
    cpu_percent: float  # the pool's threads together, percent of one core
    identified_by: str = LLAMACPP_IDENTIFIED_BY
    spin_parked: bool = False  # its workers spin before they sleep: busy includes waiting for work (exllamav3)


@dataclass(frozen=True)
class PoolSource:
    """Where one engine's CPU-expert pool runs: the process whose threads form it, and its size."""

    pid: int  # the engine itself (llama.cpp) or its CPU MoE worker child (exllamav3)
    size: int
    size_from: str
    identified_by: str = LLAMACPP_IDENTIFIED_BY
    not_pool: frozenset[int] = frozenset()  # threads that are never the pool (xllamacpp's Python main thread)
    spin_parked: bool = False


def is_llamacpp(cmdline: Sequence[str]) -> bool:
    return any(marker in arg for arg in cmdline[:3] for marker in LLAMACPP_MARKERS)


def is_exl3(cmdline: Sequence[str]) -> bool:
    return EXL3_SERVER in cmdline[:4]


def _positive_int(text: str | None) -> int | None:
    try:
        n = int(text) if text is not None else None
    except ValueError:
        return None
    return n if n is not None and n > 0 else None


def exl3_pool_size(environ: Mapping[str, str]) -> tuple[int, str]:
    """(n, where it came from) for exllamav3's CPU pool: EXL3_MOE_CPU_THREADS, else its default
    (frank.engine.cpu_pool: the physical cores less EXL3_MOE_HOST_CORES)."""
    threads = _positive_int(environ.get(cpu_pool.THREADS_ENV))
    if threads is not None:
        return threads, cpu_pool.THREADS_ENV
    return cpu_pool.exl3_default_threads(environ)[0], "physical cores less EXL3_MOE_HOST_CORES"


def exl3_worker(pid: int) -> int | None:
    """exllamav3's CPU MoE worker: the server's spawned child with the most threads (None before it is
    spawned, at the first MoE layer's load, or without CPU experts)."""
    import psutil

    try:
        children = psutil.Process(pid).children()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    spawned = []
    for child in children:
        try:
            if any(SPAWN_MARKER in arg for arg in child.cmdline()):
                spawned.append((child.num_threads(), child.pid))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return max(spawned)[1] if spawned else None


def pool_source(pid: int, cmdline: Sequence[str] | None = None) -> PoolSource | None:
    """Where engine `pid`'s CPU-expert pool runs now (None: no pool, or exllamav3's worker not spawned yet)."""
    cmdline = read_cmdline(pid) if cmdline is None else cmdline
    if is_llamacpp(cmdline):
        size, size_from = pool_size(cmdline)
        not_pool = frozenset({pid}) if any("xllamacpp_server" in arg for arg in cmdline[:3]) else frozenset()
        return PoolSource(pid, size, size_from, not_pool=not_pool)
    if is_exl3(cmdline):
        worker = exl3_worker(pid)
        if worker is None:
            return None
        size, size_from = exl3_pool_size(procfs.environ(pid))
        return PoolSource(worker, size, size_from, EXL3_IDENTIFIED_BY, spin_parked=True)
    return None


def read_cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return [a.decode(errors="replace") for a in handle.read().split(b"\0") if a]
    except OSError:
        return []


def pool_size(cmdline: Sequence[str]) -> tuple[int, str]:
    """(n, where it came from): the batch pool's threads, else the single-token pool's, else the physical
    cores (llama.cpp's default, cpu_get_num_math)."""
    for flags in THREAD_FLAGS:
        for i, arg in enumerate(cmdline[:-1]):
            if arg in flags:
                try:
                    n = int(cmdline[i + 1])
                except ValueError:
                    continue
                if n > 0:
                    return n, arg
    return cpu_pool.physical_cores(), "physical cores"


def split_pool(
    cpu_s: Mapping[int, float], size: int, lifetime: Mapping[int, float] | None = None
) -> tuple[int | None, list[int]]:
    """(main tid, worker tids): the `size` threads with the most CPU seconds (ties: the most over their
    `lifetime`), the busiest first as main. Threads that have never run are not in the pool."""
    life = lifetime or {}

    def key(tid: int) -> tuple[float, float, int]:
        return (-cpu_s[tid], -life.get(tid, 0.0), tid)

    ranked = [tid for tid in sorted(cpu_s, key=key) if cpu_s[tid] > 0 or life.get(tid, 0.0) > 0][:size]
    return (ranked[0] if ranked else None), ranked[1:]


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each thread of `pid` now, to the nanosecond (schedstat; {} when it is gone)."""
    return procfs.thread_runtimes(pid)


def worker_cpu(before: Mapping[int, float], after: Mapping[int, float], size: int) -> list[float]:
    """The pool workers' CPU seconds between two `thread_cpu` reads of one engine: the `size` busiest threads
    of that interval less the busiest (the main loop). Threads that appeared in between count from 0."""
    used = {tid: after[tid] - before.get(tid, 0.0) for tid in after}
    _, workers = split_pool(used, size)
    return [used[tid] for tid in workers]


class PoolTracker:
    """Keeps one engine's pool identity across samples (CpuSampler owns one; single-threaded)."""

    LOOK_AGAIN_S = 5.0  # how often an exllamav3 engine is searched for its worker until it has one

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._key: tuple[int, int] | None = None  # (pid, start ticks)
        self._cmdline: list[str] = []
        self._source: PoolSource | None = None
        self._look_at = 0.0  # monotonic time of the next search for the pool
        self._base: dict[int, float] = {}  # tid -> CPU seconds when first seen
        self._last: dict[int, float] = {}  # tid -> CPU seconds at the last read

    def _find(self, pid: int) -> PoolSource | None:
        if self._source is None and (is_llamacpp(self._cmdline) or is_exl3(self._cmdline)):
            now = time.monotonic()
            if now >= self._look_at:
                self._look_at = now + self.LOOK_AGAIN_S
                self._source = pool_source(pid, self._cmdline)
        return self._source

    def update(
        self, pid: int, start_ticks: int, threads: Mapping[int, Mapping[int, float]] | None, dt: float | None
    ) -> ExpertPool | None:
        """The pool now. `threads` is {pid: {tid: CPU seconds}} of the engine's processes, or None when the
        sampler did not read them (an idle engine: every thread at 0%). A pool process the sampler has not
        listed yet (exllamav3's worker, spawned after the tree was last scanned) is read here."""
        if self._key != (pid, start_ticks):
            self.reset()
            self._key = (pid, start_ticks)
            self._cmdline = read_cmdline(pid)
        source = self._find(pid)
        if source is None:
            return None
        if threads is None:
            rates: dict[int, float] = {}
        else:
            own = threads.get(source.pid)
            if own is None:
                own = thread_cpu(source.pid)
                if not own:  # the worker is gone (exllamav3 respawns it on a reload): look again
                    self._source, self._base, self._last, self._look_at = None, {}, {}, 0.0
                    return None
            own = {tid: used for tid, used in own.items() if tid not in source.not_pool}
            for tid, used in own.items():
                self._base.setdefault(tid, used)
            rates = {
                tid: procfs.busy_percent(used - self._last[tid], dt)
                for tid, used in own.items()
                if dt and tid in self._last
            }
            self._last = dict(own)
        since = {tid: self._last[tid] - base for tid, base in self._base.items() if tid in self._last}
        main, workers = split_pool(since, source.size, self._last)
        members = ([main] if main is not None else []) + workers
        pool = tuple(
            PoolThread(tid, "main" if tid == main else "worker", round(rates.get(tid, 0.0), 2), round(since[tid], 3))
            for tid in members
        )
        total = sum(t.busy_pct for t in pool)
        worker_rates = [t.busy_pct for t in pool if t.role == "worker"]
        return ExpertPool(
            size=source.size,
            size_from=source.size_from,
            threads=pool,
            busy_pct=round(total / source.size, 2),
            workers_busy_pct=round(sum(worker_rates) / len(worker_rates), 2) if worker_rates else None,
            cpu_percent=round(total, 2),
            identified_by=source.identified_by,
            spin_parked=source.spin_parked,
        )


class PoolProbe:
    """Reads one engine's CPU-expert pool threads' CPU times while a request runs (the replay's CPU-expert
    decode wait). A client cannot see when the engine starts decoding (a streamed token may be held back:
    llama.cpp withholds text that ends inside a UTF-8 character), so the probe keeps a timeline, one read every
    `interval_s`, and the decode's start is placed from the engine's own decode time (`decode_window`).
    Inactive (no timeline) for an engine without such a pool, with no pid here, or with a pool of one. For
    exllamav3 the pool is its CPU MoE worker's, found at the first read after it was spawned."""

    def __init__(self, pid: int | None, interval_s: float = 0.02) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self._cmdline = read_cmdline(pid) if pid else []
        self._source: PoolSource | None = None
        self.size = self._locate()

    def _locate(self) -> int:
        if self._source is None and self.pid and (is_llamacpp(self._cmdline) or is_exl3(self._cmdline)):
            self._source = pool_source(self.pid, self._cmdline)
        return self._source.size if self._source else 0

    @property
    def spin_parked(self) -> bool:
        return bool(self._source and self._source.spin_parked)

    @property
    def active(self) -> bool:
        if self.size <= 1 and is_exl3(self._cmdline):
            self.size = self._locate()
        return self.size > 1 and bool(self.pid)

    def read(self, clock: Callable[[], float] = time.perf_counter) -> tuple[float, dict[int, float]] | None:
        return (clock(), thread_cpu(self._source.pid)) if self.active and self._source else None

    async def record(self, timeline: list[tuple[float, dict[int, float]]], done: asyncio.Event) -> None:
        """Append a read to `timeline` every interval until `done` is set (then one last read)."""
        while True:
            point = self.read()
            if point is not None:
                timeline.append(point)
            if done.is_set():
                return
            try:
                await asyncio.wait_for(done.wait(), self.interval_s)
            except TimeoutError:
                pass

    def decode_window(
        self, timeline: Sequence[tuple[float, Mapping[int, float]]], decode_s: float | None
    ) -> list[float] | None:
        """The workers' CPU seconds over the request's last `decode_s` seconds (the engine's decode time, which
        ends with the last token): each thread's CPU time at the decode's start is interpolated between the
        two reads around it. None without a timeline of two reads or a decode time."""
        if len(timeline) < 2 or not decode_s or decode_s <= 0:
            return None
        t_end, end = timeline[-1]
        t0 = max(timeline[0][0], t_end - decode_s)
        i = max(k for k, (t, _) in enumerate(timeline) if t <= t0)
        (ta, a), (tb, b) = timeline[i], timeline[min(i + 1, len(timeline) - 1)]
        f = 0.0 if tb <= ta else (t0 - ta) / (tb - ta)
        start = {tid: a.get(tid, 0.0) + f * (b.get(tid, a.get(tid, 0.0)) - a.get(tid, 0.0)) for tid in b}
        return worker_cpu(start, end, self.size)
