"""Deterministic telemetry for Pilot and snapshot tests: real frank.telemetry / frank.engine.metrics types filled
from a recorded workstation shape (two GPUs, a 64-core pool, an engine mid-replay), so screenshots do not
change from run to run. `RecordedSampler` has the Sampler's read API (start/stop/latest/history/subscribe).
`RecordedSampler(gpu_readings=tests.recorded_nvml.readings())` takes its GPUs from a recorded NVML read by
frank's real GPU sampler (two H200s, shaped after the one H200 recorded) instead of the synthetic ones, and
`metrics_extra` adds /metrics lines (the plugins' verdicts, say) to the engine's scrape."""

from __future__ import annotations

import math

from frank.engine import metrics as m
from frank.telemetry.cpu import CpuSample, EngineProcesses, ThreadUse
from frank.telemetry.cpu_decode import CpuDecode, no_figures_why
from frank.telemetry.gpu import GpuReading, GpuSample
from frank.telemetry.sampler import EngineView, Snapshot

GIB = 1024**3

METRICS_TEXT = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="tiny-frank"}} 1.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="tiny-frank"}} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="tiny-frank"}} {kv}
"""


def _wave(i: int, base: float, amp: float, period: float = 9.0) -> float:
    return base + amp * math.sin(i / period * 2 * math.pi)


def snapshot(
    i: int,
    cores: int = 64,
    gpus: int = 2,
    engine: bool = True,
    gpu_readings: list[GpuReading] | None = None,
    metrics_extra: str = "",
) -> Snapshot:
    per_core = tuple(min(100.0, max(0.0, _wave(i + c, 78 if c % 8 else 35, 20, 5 + c % 7))) for c in range(cores))
    busiest = (
        ThreadUse(101, 100, "exl3-cpu-0", 99.0),
        ThreadUse(102, 100, "exl3-cpu-1", 97.5),
        ThreadUse(103, 100, "exl3-cpu-2", 96.0),
        ThreadUse(104, 100, "VLLM::EngineCor", 41.0),
    )
    proc = EngineProcesses(100, (100, 120), 4810.0, 147, 212 * GIB, busiest) if engine else None
    cpu = CpuSample(per_core, sum(per_core) / cores, 512 * GIB, 301 * GIB, 211 * GIB, proc, None, 0.0004)
    gpu = (
        gpu_readings[(i - 1) % len(gpu_readings)]
        if gpu_readings
        else GpuReading(
            tuple(
                GpuSample(
                    index=g,
                    name="NVIDIA RTX PRO 6000 Blackwell",
                    util_gpu=_wave(i + 3 * g, 71, 22),
                    util_mem=40.0,
                    memory_used=int(88.6 * GIB),
                    memory_total=96 * GIB,
                    power_w=_wave(i, 402, 60),
                    power_limit_w=600.0,
                    temperature_c=63.0 + g,
                    sm_clock_mhz=2430.0,
                    pcie_gen=5,
                    pcie_width=16,
                    pcie_tx_bps=_wave(i + g, 9.1e9, 5e9),
                    pcie_rx_bps=_wave(i + 2 + g, 6.4e9, 4e9),
                )
                for g in range(gpus)
            ),
            None,
            0.0006,
        )
    )
    if engine:
        text = METRICS_TEXT.format(kv=0.412) + metrics_extra
        sample = m.parse_metrics(text, "tiny-frank", taken_at=float(i), wall_time=1.7e9 + i)
        rates = m.WindowRates(
            valid=True,
            reason="",
            window_s=10.0,
            running=1.0,
            waiting=0.0,
            kv_cache_usage=0.412,
            requests_finished=0.4,
            prompt_tokens_per_s=21500.0,
            generation_tokens_per_s=_wave(i, 38.0, 6.0),
            prefix_cache_hit_rate=0.962,
            mean_ttft_s=1.21,
            mean_queue_s=0.002,
            mean_prefill_s=0.9,
            mean_front_end_s=0.31,
            window_verify_step_s=_wave(i, 0.0412, 0.004),
            mean_acceptance_length=_wave(i, 2.61, 0.35),
            draft_acceptance_rate=0.41,
            acceptance_per_position=(0.92, 0.71, _wave(i, 0.52, 0.05), 0.31),
        )
        last = m.RequestDelta(
            True,
            "",
            ttft_s=1.18 + (i % 5) * 0.01,
            queue_s=0.002,
            prefill_s=0.88,
            front_end_s=0.298 + (i % 5) * 0.01,
            prompt_tokens=131072 + 512 * (i % 5),
        )
        view = EngineView("ready", "http://127.0.0.1:8000", 100, sample, rates, last)
    else:
        view = EngineView("stopped", None, None, None, None, None)
    # the CPU-side decode row as the sampler makes it for this (vLLM) engine: no figures, and why
    decode = CpuDecode(why=no_figures_why("vllm", None), kind="vllm") if engine else CpuDecode(why="no engine running")
    return Snapshot(i, float(i), 1.7e9 + i, 1.0, cpu, gpu, view, 0.004, 0.0006, 0.0004, 0.003, decode)


class RecordedSampler:
    """Serves `count` recorded snapshots; `advance()` moves to the next one (a new sample)."""

    def __init__(self, count: int = 60, **shape) -> None:
        self.shape = shape
        self.snapshots = [snapshot(i + 1, **shape) for i in range(count)]
        self.position = count
        self.started = False
        self.subscribers: list = []

    def start(self) -> RecordedSampler:
        self.started = True
        return self

    def stop(self, timeout: float = 0.0) -> None:
        self.started = False

    def latest(self) -> Snapshot | None:
        return self.snapshots[self.position - 1] if self.position else None

    def history(self, seconds: float | None = None) -> list[Snapshot]:
        items = self.snapshots[: self.position]
        return items[-int(seconds) :] if seconds else items

    def subscribe(self, callback):
        self.subscribers.append(callback)
        return lambda: self.subscribers.remove(callback) if callback in self.subscribers else None

    def advance(self, shape: dict | None = None) -> None:
        self.snapshots.append(snapshot(len(self.snapshots) + 1, **{**self.shape, **(shape or {})}))
        self.position = len(self.snapshots)
        for callback in list(self.subscribers):  # as the real sampler does, after each sample
            callback(self.snapshots[-1])
