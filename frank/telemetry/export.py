"""Serve the console's own samples in Prometheus format, so a Grafana the user already runs can chart the
workstation. A collector renders the sampler's latest Snapshot on each scrape (no second sampling loop); the
HTTP server is prometheus_client's and binds to loopback unless the caller names another address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from frank.telemetry.sampler import Snapshot

PREFIX = "frank_"


def _g(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, doc, labels=labels or [])


def _single(name: str, doc: str, value: float) -> GaugeMetricFamily:
    """A gauge without labels holding one value."""
    return GaugeMetricFamily(PREFIX + name, doc, value=value)


class SnapshotCollector(Collector):
    def __init__(
        self, latest: Callable[[], Snapshot | None], labels: Callable[[], dict[str, str]] | None = None
    ) -> None:
        self.latest = latest
        self.labels = labels  # added to every series (frank.telemetry.activity: profile, experiment, arm, part)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self.latest()
        if snap is None:
            return
        extra = self.labels() if self.labels is not None else {}
        for family in self._families(snap):
            family.samples = [s._replace(labels={**s.labels, **extra}) for s in family.samples]
            yield family

    def _families(self, snap: Snapshot) -> Iterator[GaugeMetricFamily]:
        yield from self._cpu(snap)
        yield from self._gpus(snap)
        yield from self._engine(snap)
        yield from self._cpu_decode(snap)
        cost = _g("sample_seconds", "Wall time of the last telemetry sample", ["stage"])  # "part" is the activity label
        for part, value in (
            ("total", snap.cost_s),
            ("cpu", snap.cost_cpu_s),
            ("gpu", snap.cost_gpu_s),
            ("metrics", snap.cost_metrics_s),
        ):
            cost.add_metric([part], value)
        yield cost
        yield _single("sample_timestamp_seconds", "Unix time of the last telemetry sample", snap.wall_time)

    @staticmethod
    def _cpu(snap: Snapshot) -> Iterator[GaugeMetricFamily]:
        cpu = snap.cpu
        core = _g("cpu_core_percent", "Utilization per logical core", ["core"])
        for i, v in enumerate(cpu.per_core):
            core.add_metric([str(i)], v)
        yield core
        ram = _g("host_memory_bytes", "Host RAM", ["kind"])
        ram.add_metric(["total"], cpu.ram_total)
        ram.add_metric(["used"], cpu.ram_used)
        ram.add_metric(["available"], cpu.ram_available)
        yield ram
        eng = cpu.engine
        if eng is not None:
            if eng.cpu_percent is not None:
                yield _single(
                    "engine_cpu_percent", "CPU use of the engine's process tree, percent of one core", eng.cpu_percent
                )
            yield _single("engine_threads", "Threads in the engine's process tree", eng.num_threads)
            yield _single("engine_rss_bytes", "Resident memory of the engine's process tree", eng.rss_bytes)
            pool = eng.expert_pool
            if pool is not None:
                yield _single("engine_cpu_pool_threads", "Threads of the engine's CPU-expert pool", pool.size)
                yield _single(
                    "engine_cpu_pool_busy_percent", "The CPU-expert pool's share of its cores (0-100)", pool.busy_pct
                )

    @staticmethod
    def _gpus(snap: Snapshot) -> Iterator[GaugeMetricFamily]:
        yield _single("gpu_telemetry_up", "1 if NVML answers, 0 without GPU telemetry", 0.0 if snap.gpu.error else 1.0)
        fields: list[tuple[str, str, Callable[[Any], Any]]] = [
            ("gpu_utilization_percent", "GPU utilization", lambda g: g.util_gpu),
            ("gpu_memory_utilization_percent", "Memory controller utilization", lambda g: g.util_mem),
            ("gpu_memory_used_bytes", "GPU memory used", lambda g: g.memory_used),
            ("gpu_memory_total_bytes", "GPU memory total", lambda g: g.memory_total),
            ("gpu_power_watts", "Power draw", lambda g: g.power_w),
            ("gpu_temperature_celsius", "GPU temperature", lambda g: g.temperature_c),
            ("gpu_sm_clock_mhz", "SM clock", lambda g: g.sm_clock_mhz),
            ("gpu_pcie_tx_bytes_per_second", "PCIe bytes sent by the GPU per second", lambda g: g.pcie_tx_bps),
            ("gpu_pcie_rx_bytes_per_second", "PCIe bytes received by the GPU per second", lambda g: g.pcie_rx_bps),
            ("gpu_engine_memory_bytes", "GPU memory of the engine's processes", lambda g: g.engine_memory),
        ]
        for name, doc, get in fields:
            fam = _g(name, doc, ["gpu", "name"])
            for gpu in snap.gpu.gpus:
                value = get(gpu)
                if value is not None:
                    fam.add_metric([str(gpu.index), gpu.name], float(value))
            yield fam

    @staticmethod
    def _engine(snap: Snapshot) -> Iterator[GaugeMetricFamily]:
        view = snap.engine
        state = _g("engine_up", "1 if the engine's /metrics answered in the last sample", ["state"])
        state.add_metric([view.state], 1.0 if view.metrics is not None and view.metrics.ok else 0.0)
        yield state
        rates = view.rates
        if rates is None or not rates.valid:
            return
        for name, doc, value in (
            ("engine_requests_running", "Requests running", rates.running),
            ("engine_requests_waiting", "Requests waiting", rates.waiting),
            ("engine_kv_cache_usage_ratio", "KV cache usage (0-1)", rates.kv_cache_usage),
            (
                "engine_prompt_tokens_per_second",
                "Prompt tokens per second over the rate window",
                rates.prompt_tokens_per_s,
            ),
            (
                "engine_generation_tokens_per_second",
                "Generated tokens per second over the rate window",
                rates.generation_tokens_per_s,
            ),
            (
                "engine_prefix_cache_hit_ratio",
                "Prefix cache hit rate over the rate window",
                rates.prefix_cache_hit_rate,
            ),
            ("engine_mean_ttft_seconds", "Mean time to first token", rates.mean_ttft_s),
            ("engine_mean_front_end_seconds", "Mean front-end time (ttft - queue - prefill)", rates.mean_front_end_s),
            ("engine_mean_verify_step_seconds", "Mean verify step (inter-token latency)", rates.window_verify_step_s),
            ("engine_mean_acceptance_length", "Mean speculative acceptance length", rates.mean_acceptance_length),
        ):
            if value is not None:
                yield _single(name, doc, float(value))

    @staticmethod
    def _cpu_decode(snap: Snapshot) -> Iterator[GaugeMetricFamily]:
        """The CPU-side decode figures (frank.telemetry.cpu_decode), each only where the engine gives it."""
        dec = snap.cpu_decode
        if dec is None:
            return
        stall = [(q, v) for q, v in (("0.5", dec.stall_median_ms), ("0.9", dec.stall_p90_ms)) if v is not None]
        if stall:
            fam = _g("exl3_gpu_stall_bracket_seconds", "exllamav3's collect bracket (EXL3_SPLIT_PROF)", ["quantile"])
            for q, ms in stall:
                fam.add_metric([q], ms / 1e3)
            yield fam
        for name, doc, value in (
            (
                "engine_cpu_expert_wait_seconds",
                "CPU-expert wait a verify step over the rate window (the pool's threads; exllamav3: upper bound)",
                dec.cpu_wait_step_s,
            ),
            ("exl3_pool_jobs", "exllamav3 CPU worker's jobs since it started (EXL3_MOE_CPU_PROF)", dec.jobs),
            ("exl3_pool_compute_seconds", "exllamav3 CPU pool's compute since its worker started", dec.compute_s),
            (
                "exl3_pool_compute_job_seconds",
                "exllamav3 CPU pool's mean compute a job since its worker started",
                None if dec.compute_us_per_job is None else dec.compute_us_per_job / 1e6,
            ),
            ("exl3_split_layers", "MoE layers split between the GPU and exllamav3's CPU worker", dec.split_layers),
            (
                "exl3_pool_compute_step_seconds",
                "exllamav3 CPU pool's compute a verify step (at most)",
                dec.compute_step_s,
            ),
            ("exl3_gpu_stall_step_seconds", "GPU time a verify step waiting for the CPU's experts", dec.stall_step_s),
            (
                "exl3_gpu_wait_ratio",
                "Share of a verify step the GPU waits for the CPU's experts (0-1)",
                dec.gpu_wait_share,
            ),
            (
                "exl3_pool_busy_ratio",
                "exllamav3 CPU worker's compute over its time, its last 64 jobs (EXL3_MOE_HANDOFF_PROF; 0-1)",
                dec.pool_busy_share,
            ),
            (
                "exl3_pool_spin_job_seconds",
                "exllamav3 CPU worker's wait a job for the GPU to publish its inputs, its last 64 jobs",
                None if dec.pool_spin_ms is None else dec.pool_spin_ms / 1e3,
            ),
            (
                "exl3_pool_gap_job_seconds",
                "exllamav3 CPU worker's idle gap before a job, its last 64 jobs",
                None if dec.pool_gap_ms is None else dec.pool_gap_ms / 1e3,
            ),
            (
                "exl3_pool_empty_ratio",
                "Share of exllamav3's last 64 CPU jobs that selected no CPU-resident expert (0-1)",
                dec.pool_empty_share,
            ),
            ("exl3_placement_swaps_window", "Expert swaps exllamav3 logged in the last rate window", dec.swaps_window),
            ("exl3_placement_swaps", "Expert swaps exllamav3 logged since the engine started", dec.swaps_total),
            (
                "exl3_placement_steps_since_swap",
                "Decode steps since exllamav3's last logged swap",
                dec.steps_since_swap,
            ),
            (
                "exl3_placement_settled",
                "1 if the hot/cold placement has settled, 0 while it settles (frank.telemetry.cpu_decode)",
                None if dec.settled is None else float(dec.settled),
            ),
            (
                "exl3_prof_lines_refused",
                "exllamav3 profile lines refused (numbers that are not numbers): they moved no figure",
                dec.refused if dec.kind == "exl3" else None,
            ),
        ):
            if value is not None:
                yield _single(name, doc, float(value))


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT` or `PORT` (loopback); `[::1]:PORT` for IPv6. Raises ValueError naming the problem."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen {text!r}: expected HOST:PORT with a port 0-65535")
    return host, int(port)


def serve(
    latest: Callable[[], Snapshot | None],
    host: str = "127.0.0.1",
    port: int = 9464,
    labels: Callable[[], dict[str, str]] | None = None,
) -> tuple[Any, Any]:
    """Start the exporter in a daemon thread; returns (server, thread). `server.server_address` has the
    real port when `port` is 0. Call `server.shutdown()` to stop it. `labels()` is read on every scrape."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(latest, labels))
    return start_http_server(port, addr=host, registry=registry)
