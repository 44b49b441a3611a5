"""frank.telemetry.gpu: NVML's error paths through pynvml.NVMLError raised from monkeypatched pynvml
functions (runs everywhere), and the real library where a GPU exists (skipped with the reason otherwise).

The monkeypatched device speaks through pynvml's own ctypes structures (c_nvmlFieldValue_t etc.), so the
value-type handling and the 32-bit counter wrap measured on an H200 are exercised as NVML delivers them."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pynvml
import pytest

from frank.telemetry import gpu as g

MIB = 1 << 20


class NvmlDevice:
    """State of one pretend device; the patched pynvml functions read it."""

    def __init__(self) -> None:
        self.tx, self.rx = 1000, 5000  # raw 32-bit counters
        self.field_return = pynvml.NVML_SUCCESS
        self.field_calls = 0
        self.procs = [SimpleNamespace(pid=111, usedGpuMemory=300 * MIB), SimpleNamespace(pid=222, usedGpuMemory=None)]
        self.throttle = 0  # NVML's clock event reasons mask
        self.link = (5, 16)  # the PCIe link's current generation and width


@pytest.fixture
def nvml(monkeypatch):
    dev = NvmlDevice()
    errors: dict[str, int] = {}  # function name -> NVML error code it raises
    clock = {"t": 100.0}

    def fn(name, result):
        def call(*args, **kwargs):
            if name in errors:
                raise pynvml.NVMLError(errors[name])
            return result(*args, **kwargs) if callable(result) else result

        monkeypatch.setattr(pynvml, name, call)

    def field_values(handle, ids):
        dev.field_calls += 1
        arr = (pynvml.c_nvmlFieldValue_t * len(ids))()
        for i, fid in enumerate(ids):
            arr[i].fieldId = fid
            arr[i].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT  # as on the H200: 32-bit byte counts
            arr[i].nvmlReturn = dev.field_return
            arr[i].value.uiVal = {g.PCIE_TX_FIELD: dev.tx, g.PCIE_RX_FIELD: dev.rx}[fid] % (1 << 32)
        return arr

    def memory(handle, version=None):
        return SimpleNamespace(total=80 * 1024 * MIB, used=(2048 if version else 2600) * MIB, free=0)

    fn("nvmlInit", None)
    fn("nvmlShutdown", None)
    fn("nvmlDeviceGetCount", 1)
    fn("nvmlDeviceGetHandleByIndex", lambda i: f"handle{i}")
    fn("nvmlDeviceGetName", "NVIDIA Pretend GPU")
    fn("nvmlDeviceGetUUID", "GPU-0000")
    fn("nvmlDeviceGetMemoryInfo", memory)
    fn("nvmlDeviceGetEnforcedPowerLimit", 600_000)
    fn("nvmlDeviceGetPowerManagementDefaultLimit", 700_000)
    fn("nvmlDeviceGetCurrPcieLinkGeneration", lambda h: dev.link[0])
    fn("nvmlDeviceGetCurrPcieLinkWidth", lambda h: dev.link[1])
    fn("nvmlDeviceGetMaxPcieLinkGeneration", 5)
    fn("nvmlDeviceGetMaxPcieLinkWidth", 16)
    fn("nvmlDeviceGetUtilizationRates", SimpleNamespace(gpu=42, memory=7))
    fn("nvmlDeviceGetPowerUsage", 123_456)
    fn("nvmlDeviceGetTemperature", 55)
    fn("nvmlDeviceGetClockInfo", lambda h, clock: {pynvml.NVML_CLOCK_SM: 1980, pynvml.NVML_CLOCK_MEM: 2619}[clock])
    fn("nvmlDeviceGetMaxClockInfo", lambda h, clock: {pynvml.NVML_CLOCK_SM: 1980, pynvml.NVML_CLOCK_MEM: 3201}[clock])
    fn("nvmlDeviceGetCurrentClocksEventReasons", lambda h: dev.throttle)
    fn("nvmlDeviceGetFieldValues", field_values)
    fn("nvmlDeviceGetComputeRunningProcesses", lambda h: dev.procs)
    fn("nvmlDeviceGetGraphicsRunningProcesses", lambda h: [])

    def never(*a):
        raise AssertionError("nvmlDeviceGetPcieThroughput blocks ~20 ms: the sampler must never call it")

    monkeypatch.setattr(pynvml, "nvmlDeviceGetPcieThroughput", never)
    # the module's clock only (patching time.monotonic itself would stop every other clock in the process)
    monkeypatch.setattr(g, "time", SimpleNamespace(monotonic=lambda: clock["t"], perf_counter=time.perf_counter))
    return SimpleNamespace(dev=dev, errors=errors, clock=clock)


def test_no_driver_gives_a_clear_reason(nvml):
    nvml.errors["nvmlInit"] = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    s = g.GpuSampler()
    r = s.sample()
    assert r.gpus == () and r.error == "no GPU telemetry (Driver Not Loaded)"
    assert s.sample().error == r.error  # and it stays quiet, no exception


def test_library_missing_and_no_devices(nvml):
    nvml.errors["nvmlInit"] = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    assert g.GpuSampler().sample().error == "no GPU telemetry (NVML Shared Library Not Found)"
    del nvml.errors["nvmlInit"]
    nvml.errors["nvmlDeviceGetCount"] = pynvml.NVML_ERROR_GPU_IS_LOST
    assert g.GpuSampler().sample().error == "no GPU telemetry (GPU is lost)"


def test_without_nvidia_ml_py(monkeypatch):
    monkeypatch.setattr(g, "pynvml", None)
    assert "nvidia-ml-py is not installed" in g.GpuSampler().sample().error


def test_all_fields(nvml):
    s = g.GpuSampler()
    first = s.sample(engine_pids={111})
    assert first.error is None and len(first.gpus) == 1
    x = first.gpus[0]
    assert (x.name, x.util_gpu, x.util_mem, x.power_w, x.power_limit_w, x.temperature_c, x.sm_clock_mhz) == (
        "NVIDIA Pretend GPU",
        42.0,
        7.0,
        123.456,
        600.0,
        55.0,
        1980.0,
    )
    assert x.memory_used == 2048 * MIB  # the v2 call (reserved memory not counted as used, as nvidia-smi)
    assert (x.pcie_gen, x.pcie_width) == (5, 16)
    assert x.pcie_tx_bps is None and x.errors == ()  # the first read only primes the counters
    assert [p.pid for p in x.processes if p.engine] == [111] and x.engine_memory == 300 * MIB
    assert s.static[0].uuid == "GPU-0000"
    assert (x.mem_clock_mhz, x.throttle_reasons) == (2619.0, ())
    assert (x.pcie_gen_max, x.pcie_width_max, x.power_default_limit_w) == (5, 16, 700.0)
    assert (x.sm_clock_max_mhz, x.mem_clock_max_mhz) == (1980.0, 3201.0)


def test_throttle_reasons_are_named_and_the_link_read_again(nvml):
    """The clock event reasons by name (an unknown bit by its value); a link that trains down under the sampler
    shows once LINK_REFRESH_S has passed, its maximum stays the card's."""
    s = g.GpuSampler()
    nvml.dev.throttle = 0x4 | 0x40 | 0x1000
    x = s.sample().gpus[0]
    assert x.throttle_reasons == ("sw_power_cap", "hw_thermal", "0x1000")
    nvml.dev.link = (1, 8)
    nvml.clock["t"] += g.LINK_REFRESH_S / 2
    assert (s.sample().gpus[0].pcie_gen, s.sample().gpus[0].pcie_width) == (5, 16)  # not read again yet
    nvml.clock["t"] += g.LINK_REFRESH_S
    y = s.sample().gpus[0]
    assert (y.pcie_gen, y.pcie_width, y.pcie_gen_max, y.pcie_width_max) == (1, 8, 5, 16)
    assert g.throttle_names(0) == ()


def test_pcie_rates_from_field_counters_across_a_32bit_wrap(nvml):
    s = g.GpuSampler()
    nvml.dev.tx = (1 << 32) - 1000
    s.sample()
    nvml.clock["t"] += 2.0
    nvml.dev.tx += 3000  # wraps past 2**32
    nvml.dev.rx += 4_000_000
    x = s.sample().gpus[0]
    assert x.pcie_tx_bps == pytest.approx(1500.0) and x.pcie_rx_bps == pytest.approx(2_000_000.0)
    assert not x.pcie_may_alias


def test_heavy_traffic_turns_on_sub_polls_that_keep_the_totals_exact(nvml):
    s = g.GpuSampler()
    s.sample()
    assert s.pcie_poll_interval(1.0) is None  # idle: no extra reads
    # 50 GB/s for one second, read only at the ends: 11 wraps missed; the rate is wrong and flagged
    nvml.clock["t"] += 1.0
    nvml.dev.rx += 50_000_000_000
    x = s.sample().gpus[0]
    assert x.pcie_may_alias and x.pcie_rx_bps < 50e9
    step = s.pcie_poll_interval(1.0)
    assert step is not None and step * 63e9 * 1.1 < (1 << 32)  # the link cannot move 4 GiB in one step
    # next second with sub-polls every `step` (as the sampler thread does between samples)
    t = 0.0
    while t + step < 1.0:
        t += step
        nvml.clock["t"] += step
        nvml.dev.rx += int(50e9 * step)
        s.poll_pcie()
    nvml.clock["t"] += 1.0 - t
    nvml.dev.rx += int(50e9 * (1.0 - t))
    x = s.sample().gpus[0]
    assert x.pcie_rx_bps == pytest.approx(50e9, rel=1e-6) and not x.pcie_may_alias


def test_wait_until_sub_polls_only_under_heavy_traffic(nvml, monkeypatch):
    real_time = time
    monkeypatch.setattr(g, "time", time)
    s = g.GpuSampler()
    s.sample()
    calls = nvml.dev.field_calls
    s.wait_until(real_time.monotonic() + 0.15, threading.Event(), 1.0)
    assert nvml.dev.field_calls == calls  # idle: one plain wait
    s._pcie_peak_bps = 40e9  # as after a sample that saw 40 GB/s
    s.wait_until(real_time.monotonic() + 0.2, threading.Event(), 1.0)
    assert nvml.dev.field_calls - calls >= 2


def test_one_refused_field_leaves_the_others(nvml):
    nvml.errors["nvmlDeviceGetPowerUsage"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    nvml.errors["nvmlDeviceGetComputeRunningProcesses"] = pynvml.NVML_ERROR_NO_PERMISSION
    x = g.GpuSampler().sample(engine_pids={111}).gpus[0]
    assert x.power_w is None and x.util_gpu == 42.0
    assert "power: Not Supported" in x.errors
    assert "compute processes: Insufficient Permissions" in x.errors
    assert x.processes == () and x.engine_memory == 0


def test_unsupported_pcie_counters_are_asked_once(nvml):
    nvml.dev.field_return = pynvml.NVML_ERROR_NOT_SUPPORTED
    s = g.GpuSampler()
    a, b = s.sample().gpus[0], s.sample().gpus[0]
    assert a.pcie_tx_bps is None and b.pcie_rx_bps is None
    assert b.errors == ("pcie counters: Not Supported",)
    assert nvml.dev.field_calls == 1


def test_field_call_error_and_static_errors(nvml):
    nvml.errors["nvmlDeviceGetFieldValues"] = pynvml.NVML_ERROR_TIMEOUT
    nvml.errors["nvmlDeviceGetName"] = pynvml.NVML_ERROR_UNKNOWN
    nvml.errors["nvmlDeviceGetCurrPcieLinkGeneration"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    x = g.GpuSampler().sample().gpus[0]
    assert x.name == "GPU 0" and x.pcie_gen is None and x.pcie_width == 16
    assert "pcie counters: Timeout" in x.errors


def test_memory_info_v1_fallback(nvml, monkeypatch):
    def v1_only(handle, version=None):
        if version:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return SimpleNamespace(total=80 * 1024 * MIB, used=2600 * MIB, free=0)

    monkeypatch.setattr(pynvml, "nvmlDeviceGetMemoryInfo", v1_only)
    assert g.GpuSampler().sample().gpus[0].memory_used == 2600 * MIB


def test_gpu_lost_mid_run_is_reported_per_field(nvml):
    s = g.GpuSampler()
    s.sample()
    for name in (
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetFieldValues",
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetGraphicsRunningProcesses",
    ):
        nvml.errors[name] = pynvml.NVML_ERROR_GPU_IS_LOST
    x = s.sample().gpus[0]
    # utilization, memory, power, temperature, the SM and memory clocks, the clock event reasons, PCIe, processes x2
    assert len(x.errors) == 10 and all("GPU is lost" in e for e in x.errors)
    assert x.util_gpu is None and x.memory_used is None and x.memory_total == 80 * 1024 * MIB


def _real_nvml_reason() -> str | None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return str(exc)
    try:
        return None if pynvml.nvmlDeviceGetCount() else "NVML sees no GPU"
    finally:
        pynvml.nvmlShutdown()


_REASON = _real_nvml_reason()


@pytest.mark.skipif(_REASON is not None, reason=f"no GPU here: {_REASON}")
def test_real_nvml():
    s = g.GpuSampler()
    try:
        assert s.open() is None
        first = s.sample()
        second = s.sample()
        assert first.error is None and len(second.gpus) == pynvml.nvmlDeviceGetCount()
        for x in second.gpus:
            assert x.name and x.memory_total and x.memory_used is not None and x.pcie_tx_bps is not None
        assert second.cost_s < 0.05
    finally:
        s.close()
