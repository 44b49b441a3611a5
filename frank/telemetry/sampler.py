"""One thread samples CPU, GPUs and the engine's /metrics every period and publishes immutable Snapshots.

The thread owns the loop and its samplers (/proc deltas, NVML handles, the kept-alive /metrics connection),
so nothing is shared but the finished snapshots. It never overlaps itself: the next sample is due one period after the
previous one was due; a slow read pushes the schedule forward instead of stacking reads. Snapshots go into a
bounded ring buffer (history for sparklines) and to subscribers, which are called on the sampler thread and
must only hand the snapshot over (the console posts a message; latest wins).

The engine to watch comes from a `target` callable returning a `Target` (url, pid, api key, model name) or
None when no engine runs; `controller_target()` adapts frank.engine.controller.EngineController.

A console idles with the sampler running, so a sample does only the work that can have changed: the
controller's state is re-read when its files change, /metrics is parsed only when the wanted families
changed (metrics.py), an idle engine's threads are not read (cpu.py), NVML is given up once when there is
no GPU (gpu.py), an exllamav3 engine's log is read only for what it gained (one stat a sample:
cpu_decode.py). `benchmarks/bench_console.py` measures what that costs beside the peer vllm-htop.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from frank.engine import metrics as m
from frank.engine.measures import window_cpu_expert_wait_s
from frank.engine.metrics.sample import ScrapeFailure
from frank.engine.records import RUNNING_STATES, EngineState
from frank.telemetry.cpu import CpuSample, CpuSampler
from frank.telemetry.cpu_decode import CpuDecode, Exl3ProfWatch, no_figures_why
from frank.telemetry.gpu import GpuReading, GpuSampler
from frank.telemetry.rig import rig_facts

DEFAULT_PERIOD_S = 1.0
DEFAULT_HISTORY_S = 900.0  # 15 minutes of history at the default period
DEFAULT_RATE_WINDOW_S = 10.0


@dataclass(frozen=True)
class Target:
    url: str | None
    pid: int | None
    api_key: str | None = None
    model_name: str | None = None
    state: EngineState = "ready"  # the controller's view
    kind: str | None = None  # the engine kind (vllm, llamacpp, exl3): None for a server watched by URL
    log_path: str | None = None  # the engine's log (exllamav3's profile lines are read from it)


TargetSource = Callable[[], "Target | None"]


# The engine as the sampler sees it: the controller's state, or how a scrape of a running engine failed.
EngineViewState = EngineState | ScrapeFailure


@dataclass(frozen=True)
class EngineView:
    """What the sampler knows about the engine in one snapshot."""

    state: EngineViewState
    url: str | None
    pid: int | None
    metrics: m.MetricsSample | None
    rates: m.WindowRates | None  # over the last rate window (up to DEFAULT_RATE_WINDOW_S)
    last_request: m.RequestDelta | None  # the most recent request that ran alone between idle samples
    error: str | None = None

    @property
    def refused_plugins(self) -> tuple[str, ...]:
        """frank's vLLM parts that stay off on this engine: its vLLM internals differ (from its /metrics)."""
        return self.metrics.refused_plugins() if self.metrics is not None and self.metrics.ok else ()


@dataclass(frozen=True)
class Snapshot:
    seq: int
    taken_at: float  # time.monotonic() at the start of the sample
    wall_time: float
    period_s: float
    cpu: CpuSample
    gpu: GpuReading
    engine: EngineView
    cost_s: float  # wall time the whole sample took
    cost_gpu_s: float
    cost_cpu_s: float
    cost_metrics_s: float
    # the CPU-side decode figures (frank.telemetry.cpu_decode): None only in a snapshot made by hand
    cpu_decode: CpuDecode | None = None


def controller_target(controller: Any = None, recheck_s: float = 10.0) -> TargetSource:
    """A target source backed by frank.engine.controller (imported lazily: the controller may land later).
    The served model name and API key come from the running engine's profile. The controller's full status
    (three JSON files and a process check) is read again only when its state files change, its process
    group is gone, or `recheck_s` passed: between those, the last target stands (a 1 Hz sampler)."""
    profiles: dict[str, tuple[str | None, str | None]] = {}
    last: dict[str, Any] = {"key": None, "at": -1e18, "target": None, "pgid": None}

    def profile_bits(name: str | None) -> tuple[str | None, str | None]:
        if name is None:
            return (None, None)
        if name not in profiles:
            try:
                from frank.engine.profiles import load_profile

                prof = load_profile(name)
                profiles[name] = (prof.served_model_name, prof.api_key or None)
            except Exception:  # a profile edited or removed since the start: watch without the filter
                profiles[name] = (None, None)
        return profiles[name]

    def files_key(files: Any) -> tuple[Any, ...]:
        out: list[tuple[int, int] | None] = []
        for path in (files.record, files.run, files.exit):
            try:
                st = os.stat(path)
                out.append((st.st_mtime_ns, st.st_size))
            except OSError:
                out.append(None)
        return tuple(out)

    def alive(pgid: int | None) -> bool:
        if not pgid:
            return True  # stopped: nothing to lose
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True

    def source() -> Target | None:
        nonlocal controller
        if controller is None:
            from frank.engine.controller import EngineController

            controller = EngineController()
        key, now = files_key(controller.files), time.monotonic()
        if key == last["key"] and now - last["at"] < recheck_s and alive(last["pgid"]):
            value: Target | None = last["target"]
            return value
        st = controller.status(check_health=False)  # /metrics answers for health; no second request
        target = None
        if st.state != "stopped":
            model_name, api_key = profile_bits(st.profile) if st.profile else (None, None)
            api_key = controller.client_api_key or api_key  # the key the engine was started with (llama.cpp's)
            target = Target(
                url=st.url,
                pid=st.pid,
                api_key=api_key,
                model_name=model_name,
                state=st.state,
                kind=st.kind,
                log_path=st.log_path,
            )
        last.update(key=key, at=now, target=target, pgid=st.pgid if st.state in RUNNING_STATES else None)
        return target

    return source


def static_target(
    url: str | None, pid: int | None = None, api_key: str | None = None, model_name: str | None = None
) -> TargetSource:
    target = Target(url, pid, api_key, model_name)
    return lambda: target


class Sampler:
    def __init__(
        self,
        target: TargetSource | None = None,
        period_s: float = DEFAULT_PERIOD_S,
        history_s: float = DEFAULT_HISTORY_S,
        rate_window_s: float = DEFAULT_RATE_WINDOW_S,
        gpu: bool = True,
        scrape_timeout_s: float = 2.0,
        gpu_sampler: GpuSampler | None = None,
        cpu_sampler: CpuSampler | None = None,
    ) -> None:
        if period_s <= 0:
            raise ValueError(f"period must be positive, not {period_s}")
        self.target = target or (lambda: None)
        self.period_s = period_s
        self.rate_window_s = rate_window_s
        self._history: deque[Snapshot] = deque(maxlen=max(1, math.ceil(history_s / period_s)))
        self._lock = threading.Lock()
        self._subscribers: list[Callable[[Snapshot], None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._gpu = gpu_sampler or (GpuSampler() if gpu else None)
        self._cpu = cpu_sampler
        self._scrape_timeout_s = scrape_timeout_s
        self._metrics: m.MetricsScraper | None = None  # one kept-alive connection to the watched engine
        self._seq = 0
        self._metrics_hist: deque[m.MetricsSample] = deque()
        self._idle_base: m.MetricsSample | None = None
        self._last_request: m.RequestDelta | None = None
        self._exl3: Exl3ProfWatch | None = None  # an exllamav3 engine's profile lines, followed in its log
        self.errors = 0  # subscriber callbacks that raised

    # -- public API ------------------------------------------------------------------------------
    def start(self) -> Sampler:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="frank-telemetry", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0, final: bool = False) -> None:
        """Stop the thread; with `final`, take one last sample on the calling thread first (a stretch shorter
        than a period then still has one sample past the first, which only primes the CPU deltas)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            alive = self._thread.is_alive()
            self._thread = None
            if final and not alive:
                self._sample()
        self._close()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def latest(self) -> Snapshot | None:
        with self._lock:
            return self._history[-1] if self._history else None

    def history(self, seconds: float | None = None) -> list[Snapshot]:
        """Snapshots oldest first, all of them or those of the last `seconds`."""
        with self._lock:
            items = list(self._history)
        if seconds is not None and items:
            cutoff = items[-1].taken_at - seconds
            items = [s for s in items if s.taken_at >= cutoff]
        return items

    @property
    def capacity(self) -> int:
        return self._history.maxlen or 0

    def subscribe(self, callback: Callable[[Snapshot], None]) -> Callable[[], None]:
        """Call `callback(snapshot)` on the sampler thread after each sample; returns an unsubscribe."""
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def sample_once(self) -> Snapshot:
        """Take one sample now on the calling thread (for --once and tests; not while the thread runs)."""
        if self._thread is not None:
            raise RuntimeError("sample_once() while the sampler thread runs")
        return self._sample()

    # -- the loop --------------------------------------------------------------------------------
    def _run(self) -> None:
        due = time.monotonic()
        try:
            while not self._stop.is_set():
                self._sample()
                due += self.period_s
                now = time.monotonic()
                if due < now:  # a slow read: skip the missed ticks instead of bursting to catch up
                    due = now + self.period_s - (now - due) % self.period_s
                self._wait_until(due)
        finally:
            self._close()

    def _wait_until(self, due: float) -> None:
        if self._gpu is not None:
            self._gpu.wait_until(due, self._stop, self.period_s)
        else:
            self._stop.wait(max(0.0, due - time.monotonic()))

    def _close(self) -> None:
        if self._gpu is not None:
            self._gpu.close()
        if self._metrics is not None:
            self._metrics.close()

    def _sample(self) -> Snapshot:
        t0 = time.perf_counter()
        taken_at, wall = time.monotonic(), time.time()
        if self._cpu is None:
            self._cpu = CpuSampler()
        try:
            target = self.target()
            target_error = None
        except Exception as exc:  # the controller's state files can be mid-write; say so, keep sampling
            target, target_error = None, f"engine status: {exc}"
        # The scrape first, on this thread: a second thread to overlap the engine's ~8 ms /metrics render
        # with the /proc reads saved latency nobody sees, and cost two thread hand-offs a sample.
        scrape = self._scrape(target)
        t1 = time.perf_counter()
        cpu = self._cpu.sample(target.pid if target else None)
        t2 = time.perf_counter()
        if self._gpu is not None:
            gpu = self._gpu.sample(self._cpu.engine_pids() if target else ())
        else:
            gpu = GpuReading((), "no GPU telemetry (disabled)", 0.0)
        t3 = time.perf_counter()
        engine = self._engine_view(target, target_error, scrape)
        t4 = time.perf_counter()
        self._seq += 1
        snap = Snapshot(
            self._seq, taken_at, wall, self.period_s, cpu, gpu, engine, t4 - t0, t3 - t2, t2 - t1, t1 - t0 + t4 - t3
        )
        snap = replace(snap, cpu_decode=self._cpu_decode(target, snap))
        with self._lock:
            self._history.append(snap)
            subscribers = list(self._subscribers)
        for cb in subscribers:
            try:
                cb(snap)
            except Exception:  # a broken subscriber must not stop the telemetry
                self.errors += 1
        return snap

    def _cpu_decode(self, target: Target | None, snap: Snapshot) -> CpuDecode:
        """frank's CPU-expert wait a step over the window, and an exllamav3 engine's own figures from its log."""
        with self._lock:
            history = [*self._history, snap]
        wait = window_cpu_expert_wait(snap, history)
        if target is None or target.kind != "exl3" or not target.log_path:
            self._exl3 = None
            why = "no engine running" if target is None else no_figures_why(target.kind, target.log_path)
            return CpuDecode(why=why, kind=target.kind if target else None, cpu_wait_step_s=wait)
        if self._exl3 is None:
            self._exl3 = Exl3ProfWatch(window_s=self.rate_window_s)
        ms, rates = snap.engine.metrics, snap.engine.rates
        steps = ms.hist(m.ITL)[1] if ms is not None and ms.ok and ms.has(m.ITL) else None
        self._exl3.update(target.log_path, target.pid, snap.taken_at, steps)
        verify = rates.window_verify_step_s if rates is not None and rates.valid else None
        return self._exl3.figures(steps, verify, wait)

    def _scrape(self, target: Target | None) -> m.MetricsSample | None:
        if target is None or not target.url:
            return None
        scraper = self._metrics
        if scraper is None or (scraper.base_url, scraper.api_key, scraper.model_name) != (
            target.url,
            target.api_key,
            target.model_name,
        ):
            if scraper is not None:
                scraper.close()
            scraper = self._metrics = m.MetricsScraper(
                target.url, target.api_key, target.model_name, self._scrape_timeout_s
            )
        return scraper.fetch()

    def _engine_view(self, target: Target | None, error: str | None, sample: m.MetricsSample | None) -> EngineView:
        if target is None or not target.url or sample is None:
            self._forget_metrics()
            return EngineView(
                "stopped" if error is None else "error", None, None, None, None, self._last_request, error
            )
        if not sample.ok:
            self._forget_metrics()
            # while the controller says starting, a refused connection is expected
            state: EngineViewState = target.state if target.state != "ready" or sample.state == "ok" else sample.state
            return EngineView(state, target.url, target.pid, sample, None, self._last_request, sample.error)
        rates = self._rates(sample)
        self._track_request(sample)
        return EngineView(target.state, target.url, target.pid, sample, rates, self._last_request, None)

    def _forget_metrics(self) -> None:
        self._metrics_hist.clear()
        self._idle_base = None

    def _rates(self, sample: m.MetricsSample) -> m.WindowRates | None:
        hist = self._metrics_hist
        hist.append(sample)
        while len(hist) > 1 and sample.taken_at - hist[1].taken_at >= self.rate_window_s:
            hist.popleft()
        if len(hist) < 2:
            return None
        rates = m.window_rates(hist[0], sample)
        if not rates.valid:  # a restart inside the window: start the window again from here
            hist.clear()
            hist.append(sample)
        return rates

    def _track_request(self, sample: m.MetricsSample) -> None:
        """A request that ran alone between two idle samples gets its own server-side values."""
        idle = (sample.gauge(m.RUNNING) or 0) == 0 and (sample.gauge(m.WAITING) or 0) == 0
        if not idle:
            return
        base = self._idle_base
        if base is not None and sample.hist(m.E2E)[1] != base.hist(m.E2E)[1]:
            delta = m.request_delta(base, sample)
            if delta.attributed:
                self._last_request = delta
        self._idle_base = sample


def snapshot_to_json(snap: Snapshot) -> dict[str, Any]:
    """One plain-JSON object per snapshot: keys cpu (with per_core), gpus (+ gpu_error), rig (the fixed facts:
    null GPUs with the reason where there are none), engine, cpu_decode (frank.telemetry.cpu_decode), cost."""
    from dataclasses import asdict

    eng = snap.engine
    engine: dict[str, Any] = {
        "state": eng.state,
        "url": eng.url,
        "pid": eng.pid,
        "error": eng.error,
        "metrics": m.sample_summary(eng.metrics) if eng.metrics is not None else None,
        "rates": asdict(eng.rates) if eng.rates is not None else None,
        "last_request": asdict(eng.last_request) if eng.last_request is not None else None,
    }
    pool = snap.cpu.engine.expert_pool if snap.cpu.engine is not None else None
    return {
        "seq": snap.seq,
        "wall_time": snap.wall_time,
        "period_s": snap.period_s,
        "cpu": asdict(snap.cpu),
        "expert_pool": asdict(pool) if pool is not None else None,  # also under cpu.engine
        "cpu_decode": asdict(snap.cpu_decode) if snap.cpu_decode is not None else None,
        "gpus": [asdict(g) for g in snap.gpu.gpus],
        "gpu_error": snap.gpu.error,
        "rig": rig_facts(snap.gpu, snap.cpu).to_json(),  # the fixed facts (frank.telemetry.rig)
        "engine": engine,
        "cost_ms": {
            "total": snap.cost_s * 1e3,
            "cpu": snap.cost_cpu_s * 1e3,
            "gpu": snap.cost_gpu_s * 1e3,
            "metrics": snap.cost_metrics_s * 1e3,
        },
    }


def window_cpu_expert_wait(snap: Snapshot | None, history: Sequence[Snapshot] | None = None) -> float | None:
    """The window's CPU-expert wait per verify step (measures.window_cpu_expert_wait_s): the pool workers'
    busy share (their mean over the rate window's snapshots when `history` is given, else this snapshot's)
    over the window's verify-step rate. None without a pool (an engine that is neither llama.cpp nor
    exllamav3 with CPU experts)."""
    if snap is None:
        return None
    eng, rates = snap.cpu.engine, snap.engine.rates
    if eng is None or eng.expert_pool is None or rates is None or not rates.valid:
        return None
    return _wait_from(eng.expert_pool.workers_busy_pct, snap.taken_at, rates, history)


def _wait_from(
    busy_now: float | None, taken_at: float, rates: m.WindowRates, history: Sequence[Snapshot] | None
) -> float | None:
    shares = [busy_now]
    if history:
        start, shares = taken_at - rates.window_s, []
        for s in reversed(history):  # oldest first: only the window's tail is read
            if s.taken_at <= start:
                break
            if s.cpu.engine is not None and s.cpu.engine.expert_pool is not None:
                shares.append(s.cpu.engine.expert_pool.workers_busy_pct)
    busy = [b for b in shares if b is not None]
    mean = sum(busy) / len(busy) if busy else None
    return window_cpu_expert_wait_s(mean, rates.window_s, rates.decode_steps)
