"""Check frank/telemetry/gpu.py on a real GPU: every field once against `nvidia-smi --query-gpu`, and the cost
of a sample (whole NVML read, per GPU, and the PCIe field counters alone) next to the blocking
nvmlDeviceGetPcieThroughput that the sampler never calls.

Imports only nvidia-ml-py, psutil, the stdlib and frank.telemetry (torch, if present, only to make PCIe
traffic for a rate check). Run from the repo root:  PYTHONPATH=. python scripts/nvml_device_check.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import pynvml

from frank.telemetry.cpu import CpuSampler
from frank.telemetry.gpu import PCIE_RX_FIELD, PCIE_TX_FIELD, GpuSampler

QUERY = (
    "index,name,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,power.limit,"
    "temperature.gpu,clocks.sm,pcie.link.gen.current,pcie.link.width.current,pcie.link.gen.max,"
    "pcie.link.width.max"
)
MIB = 1024 * 1024


def smi() -> tuple[list[dict[str, str]], float]:
    t0 = time.perf_counter()
    out = subprocess.run(
        ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cost = time.perf_counter() - t0
    keys = QUERY.split(",")
    return [dict(zip(keys, (v.strip() for v in line.split(",")))) for line in out.strip().splitlines()], cost


def num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # "[N/A]"


def compare(ours, static, row: dict[str, str]) -> list[tuple[str, object, object, bool]]:
    """(field, ours, nvidia-smi, agrees). Instantaneous fields get tolerances; static ones must be equal."""

    def close(a, b, abs_tol, rel_tol=0.0):
        if a is None or b is None:
            return a is None and b is None
        return abs(a - b) <= max(abs_tol, rel_tol * abs(b))

    checks = []

    def add(name, a, b, ok):
        checks.append((name, a, b, bool(ok)))

    add("name", ours.name, row["name"], ours.name == row["name"])
    add("uuid", static.uuid, row["uuid"], static.uuid == row["uuid"])
    add(
        "utilization.gpu %",
        ours.util_gpu,
        num(row["utilization.gpu"]),
        close(ours.util_gpu, num(row["utilization.gpu"]), 10),
    )
    add(
        "utilization.memory %",
        ours.util_mem,
        num(row["utilization.memory"]),
        close(ours.util_mem, num(row["utilization.memory"]), 10),
    )
    used = ours.memory_used / MIB if ours.memory_used is not None else None
    add("memory.used MiB", used, num(row["memory.used"]), close(used, num(row["memory.used"]), 64, 0.02))
    total = ours.memory_total / MIB if ours.memory_total is not None else None
    add("memory.total MiB", total, num(row["memory.total"]), close(total, num(row["memory.total"]), 1))
    add("power.draw W", ours.power_w, num(row["power.draw"]), close(ours.power_w, num(row["power.draw"]), 10, 0.1))
    add(
        "power.limit W",
        ours.power_limit_w,
        num(row["power.limit"]),
        close(ours.power_limit_w, num(row["power.limit"]), 1),
    )
    add(
        "temperature.gpu C",
        ours.temperature_c,
        num(row["temperature.gpu"]),
        close(ours.temperature_c, num(row["temperature.gpu"]), 2),
    )
    add(
        "clocks.sm MHz",
        ours.sm_clock_mhz,
        num(row["clocks.sm"]),
        close(ours.sm_clock_mhz, num(row["clocks.sm"]), 30, 0.1),
    )
    add(
        "pcie.link.gen.current",
        ours.pcie_gen,
        num(row["pcie.link.gen.current"]),
        close(ours.pcie_gen, num(row["pcie.link.gen.current"]), 0),
    )
    add(
        "pcie.link.width.current",
        ours.pcie_width,
        num(row["pcie.link.width.current"]),
        close(ours.pcie_width, num(row["pcie.link.width.current"]), 0),
    )
    add(
        "pcie.link.gen.max",
        static.pcie_gen_max,
        num(row["pcie.link.gen.max"]),
        close(static.pcie_gen_max, num(row["pcie.link.gen.max"]), 0),
    )
    add(
        "pcie.link.width.max",
        static.pcie_width_max,
        num(row["pcie.link.width.max"]),
        close(static.pcie_width_max, num(row["pcie.link.width.max"]), 0),
    )
    return checks


def stats_ms(values: list[float]) -> dict[str, float]:
    v = sorted(values)
    return {
        "n": len(v),
        "median_ms": round(statistics.median(v) * 1e3, 4),
        "p95_ms": round(v[int(0.95 * (len(v) - 1))] * 1e3, 4),
        "max_ms": round(v[-1] * 1e3, 4),
    }


def pcie_traffic_check(sampler: GpuSampler, seconds: float = 6.0) -> dict[str, object]:
    """With torch present: copy host->device in a thread for `seconds` while the sampler runs its 1 s loop
    (with the PCIe sub-polls it does under heavy traffic); compare its RX rates with the bytes copied."""
    try:
        import torch
    except ImportError:
        return {"skipped": "torch not installed: no PCIe traffic generated"}
    if not torch.cuda.is_available():
        return {"skipped": "torch without CUDA"}
    import threading

    host = torch.empty(256 * MIB, dtype=torch.uint8).pin_memory()
    dev = torch.empty_like(host, device="cuda:0")
    stop, copied = threading.Event(), [0]

    def copy_loop() -> None:
        torch.cuda.set_device(0)
        while not stop.is_set():
            dev.copy_(host)
            torch.cuda.synchronize()
            copied[0] += host.numel()

    rows, polls = [], []
    orig_poll = sampler.poll_pcie

    def counted_poll() -> None:
        polls.append(time.monotonic())
        orig_poll()

    sampler.poll_pcie = counted_poll  # type: ignore[method-assign]
    sampler.sample()
    worker = threading.Thread(target=copy_loop)
    _t_start, _c_start = time.monotonic(), 0
    worker.start()
    due = time.monotonic()
    never = threading.Event()
    for i in range(int(seconds)):
        due += 1.0
        c0, t0 = copied[0], time.monotonic()
        sampler.wait_until(due, never, 1.0)
        r = sampler.sample().gpus[0]
        c1, t1 = copied[0], time.monotonic()
        rows.append(
            {
                "s": i + 1,
                "ours_rx_GBps": round((r.pcie_rx_bps or 0) / 1e9, 2),
                "copied_GBps": round((c1 - c0) / (t1 - t0) / 1e9, 2),
                "may_alias": r.pcie_may_alias,
                "poll_interval_s": sampler.pcie_poll_interval(1.0),
            }
        )
    stop.set()
    worker.join()
    sampler.poll_pcie = orig_poll  # type: ignore[method-assign]
    # NVML's own (blocking, 20 ms window) throughput during one more burst, for reference only
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    dev.copy_(host, non_blocking=True)
    nvml_rx = pynvml.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_RX_BYTES) * 1024
    torch.cuda.synchronize()
    return {
        "per_second": rows,
        "sub_polls": len(polls),
        "nvml_throughput_rx_GBps_reference": round(nvml_rx / 1e9, 2),
        "note": "counters count link bytes: expect ours ~8 % above the payload copied",
    }


def main() -> int:
    gpu = GpuSampler()
    err = gpu.open()
    if err:
        print(json.dumps({"error": err}))
        return 1
    report: dict[str, object] = {"gpus": [s.name for s in gpu.static], "driver": pynvml.nvmlSystemGetDriverVersion()}
    first = gpu.sample()  # primes the PCIe counters
    rows, smi_cost = smi()
    ours = gpu.sample(engine_pids={os.getpid()})
    mismatches = 0
    for g, st, row in zip(ours.gpus, gpu.static, rows):
        print(f"--- GPU {g.index}: {g.name}")
        for name, a, b, ok in compare(g, st, row):
            mismatches += not ok
            print(f"  {'ok ' if ok else 'BAD'} {name:26s} ours={a!s:40s} nvidia-smi={b}")
        print(f"  pcie tx/rx B/s (field counters 197/198): {g.pcie_tx_bps} / {g.pcie_rx_bps}")
        print(f"  processes: {g.processes}  errors: {g.errors}")
    report["field_mismatches"] = mismatches
    report["nvidia_smi_call_ms"] = round(smi_cost * 1e3, 1)
    report["first_sample_errors"] = [list(g.errors) for g in first.gpus]

    costs = []
    for _ in range(300):
        costs.append(gpu.sample().cost_s)
        time.sleep(0.002)
    report["nvml_sample_all_gpus"] = stats_ms(costs)
    report["nvml_sample_per_gpu_median_ms"] = round(statistics.median(costs) * 1e3 / len(gpu.static), 4)
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    fv = []
    for _ in range(300):
        t0 = time.perf_counter()
        pynvml.nvmlDeviceGetFieldValues(h, [PCIE_TX_FIELD, PCIE_RX_FIELD])
        fv.append(time.perf_counter() - t0)
    report["pcie_field_counters_both"] = stats_ms(fv)
    tp = []
    for _ in range(5):
        t0 = time.perf_counter()
        pynvml.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_TX_BYTES)
        tp.append(time.perf_counter() - t0)
    report["nvmlDeviceGetPcieThroughput_one_direction_NOT_USED"] = stats_ms(tp)
    cpu = CpuSampler()
    ccost = []
    for _ in range(50):
        time.sleep(0.01)
        ccost.append(cpu.sample(os.getpid()).cost_s)
    report["cpu_sample_self_tree"] = stats_ms(ccost)
    report["cores"] = os.cpu_count()
    report["pcie_traffic"] = pcie_traffic_check(gpu)
    gpu.close()
    print(json.dumps(report, indent=2, default=str))
    return 0 if mismatches == 0 else 2


if __name__ == "__main__":
    sys.exit(main())
