"""A recorded NVML: answers pynvml's calls from a file of per-step readings (tests/fixtures/nvml/), so frank's
real GPU sampler (frank.telemetry.gpu) reads several devices with no GPU here. It is a RECORDING of
real-shaped values, not a GPU: h200x2_shaped.json holds two H200s shaped after the one H200 the GPU machine
recorded (its "what" says how). The values come back in pynvml's own types (its ctypes field values with
their 32-bit value type, its NVMLError classes), as the driver delivers them.

`RecordedNvml.clock` is the recording's own time: the sampler reads it in place of time.monotonic (for its
PCIe deltas) and `sleep(s)` moves the recording on by whole steps, so rates are the recorded ones exactly."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pynvml

from frank.telemetry import gpu as gpu_mod

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "nvml"
H200X2 = FIXTURES / "h200x2_shaped.json"
MIB = 1 << 20


class RecordedNvml:
    """pynvml's functions over a recording; handles are device indexes."""

    # what frank.telemetry.gpu reads of pynvml besides the functions
    NVMLError = pynvml.NVMLError
    NVMLError_FunctionNotFound = pynvml.NVMLError_FunctionNotFound
    NVMLError_NotSupported = pynvml.NVMLError_NotSupported
    nvmlMemory_v2 = pynvml.nvmlMemory_v2
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_CLOCK_MEM = pynvml.NVML_CLOCK_MEM

    def __init__(self, path: Path = H200X2) -> None:
        doc = json.loads(path.read_text())
        self.what: str = doc["what"]
        self.period_s: float = float(doc["period_s"])
        self.static: list[dict[str, Any]] = doc["static"]
        self.steps: list[dict[str, Any]] = doc["steps"]
        self.step = 0

    # -- the recording's time ------------------------------------------------------------------------
    def clock(self) -> float:
        return float(self.steps[self.step]["t"])

    def sleep(self, seconds: float) -> None:
        """Move on by the steps `seconds` spans (at least one), stopping at the last."""
        ahead = max(1, round(seconds / self.period_s))
        self.step = min(self.step + ahead, len(self.steps) - 1)

    def _now(self, handle: int) -> dict[str, Any]:
        return self.steps[self.step]["devices"][handle]

    # -- pynvml's calls ------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(self.static)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, h: int) -> str:
        return self.static[h]["name"]

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self.static[h]["uuid"]

    def nvmlDeviceGetMemoryInfo(self, h: int, version: Any = None) -> SimpleNamespace:
        total = self.static[h]["memory_total_mib"] * MIB
        used = round(self._now(h)["mem_used_mib"] * MIB)
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return self.static[h]["power_limit_mw"]

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h: int) -> int:
        return self.static[h].get("power_default_limit_mw", self.static[h]["power_limit_mw"])

    def nvmlDeviceGetMaxClockInfo(self, h: int, clock: int) -> int:  # an H200's (not in the recording)
        return 3201 if clock == pynvml.NVML_CLOCK_MEM else 1980

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return int(self._now(h).get("clock_event_reasons", 0))

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:
        return self.static[h]["pcie_gen"]

    nvmlDeviceGetMaxPcieLinkGeneration = nvmlDeviceGetCurrPcieLinkGeneration

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:
        return self.static[h]["pcie_width"]

    nvmlDeviceGetMaxPcieLinkWidth = nvmlDeviceGetCurrPcieLinkWidth

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        gpu, memory = self._now(h)["util"]
        return SimpleNamespace(gpu=gpu, memory=memory)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return self._now(h)["power_mw"]

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return self._now(h)["temp_c"]

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        if clock == pynvml.NVML_CLOCK_MEM:  # not in the recording: the H200's memory clock at load
            return int(self._now(h).get("mem_mhz", 3201))
        return self._now(h)["sm_mhz"]

    def nvmlDeviceGetFieldValues(self, h: int, ids: list[int]) -> Any:
        values = {gpu_mod.PCIE_TX_FIELD: self._now(h)["pcie_tx"], gpu_mod.PCIE_RX_FIELD: self._now(h)["pcie_rx"]}
        out = (pynvml.c_nvmlFieldValue_t * len(ids))()
        for i, fid in enumerate(ids):
            out[i].fieldId = fid
            out[i].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT  # 32-bit byte counts, as on the H200
            out[i].nvmlReturn = pynvml.NVML_SUCCESS
            out[i].value.uiVal = values[fid]
        return out

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=round(mib * MIB)) for pid, mib in self._now(h)["procs"]]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: int) -> list[SimpleNamespace]:
        return []

    def nvmlDeviceGetPcieThroughput(self, *args: Any) -> None:
        raise AssertionError("nvmlDeviceGetPcieThroughput blocks ~20 ms: the sampler must never call it")


@contextmanager
def recorded_nvml(path: Path = H200X2) -> Iterator[RecordedNvml]:
    """frank.telemetry.gpu reading the recording: its pynvml and its clock replaced while inside."""
    nvml = RecordedNvml(path)
    clock = SimpleNamespace(monotonic=nvml.clock, perf_counter=nvml.clock)
    with mock.patch.object(gpu_mod, "pynvml", nvml), mock.patch.object(gpu_mod, "time", clock):
        yield nvml


def readings(path: Path = H200X2, engine_pids: tuple[int, ...] = (4242,)) -> list[gpu_mod.GpuReading]:
    """Every step of the recording as frank's GPU sampler reads it, in order (the first has no PCIe rates)."""
    out = []
    with recorded_nvml(path) as nvml:
        sampler = gpu_mod.GpuSampler()
        assert sampler.open() is None
        for i in range(len(nvml.steps)):
            nvml.step = i
            out.append(sampler.sample(engine_pids))
        sampler.close()
    return out
