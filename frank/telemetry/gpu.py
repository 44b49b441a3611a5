"""GPU telemetry through NVML (nvidia-ml-py), cheap enough to read every second.

PCIe traffic comes from the field counters NVML_FI_DEV_PCIE_COUNT_TX_BYTES / _RX_BYTES (ids
197/198, both in one nvmlDeviceGetFieldValues call, well under a millisecond); we take the deltas ourselves.
nvmlDeviceGetPcieThroughput is never called: it blocks about 20 ms per call and direction. Slow, static
fields (name, UUID, memory total, power limit, PCIe link generation and width) are read once, when the
sampler opens. Without a driver every call answers "no GPU telemetry (reason)" and nothing raises.

Each sample also reads the SM and memory clocks and why the clocks are held back (NVML's clock event
reasons, named by `THROTTLE_REASONS`), and every `LINK_REFRESH_S` the PCIe link's current generation and
width (a link trains down at idle and up under load); the maximum clocks, the default power limit and the
link's maximum are read once: the rig's fixed facts (frank.telemetry.rig).

Measured on an H200 (driver 580): the two PCIe counters are 32-bit byte counts (valueType unsigned int)
that wrap every 4 GiB, and they count link bytes (about 8 % over the payload: TLP headers). A 1 s period is
exact only below 4 GiB/s, so reads are unwrapped into 64-bit totals, and while traffic is heavy the sampler
thread calls `poll_pcie()` between samples, often enough that no read misses a whole wrap
(`pcie_poll_interval()`). Rates over an interval in which a wrap may have been missed carry
`pcie_may_alias=True`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from frank.nvml import memory_info

try:
    import pynvml
except ImportError:  # nvidia-ml-py is a console dependency, but stay usable without it
    pynvml = None

PCIE_TX_FIELD = 197  # NVML_FI_DEV_PCIE_COUNT_TX_BYTES: bytes the GPU sent over PCIe (device -> host)
PCIE_RX_FIELD = 198  # NVML_FI_DEV_PCIE_COUNT_RX_BYTES: bytes the GPU received (host -> device)
COUNTER_WRAP = {1: 1 << 32, 2: 1 << 64, 3: 1 << 64, 5: 1 << 32, 6: 1 << 16}  # by NVML valueType
LINK_REFRESH_S = 10.0  # how often the PCIe link's current generation and width are read again
# NVML's clock event ("throttle") reason bits, by name (nvmlClocksEventReason*; the rest are named by value)
THROTTLE_REASONS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
    (0x100, "display_clock"),
)
# PCIe payload rate per lane in bytes/s by link generation (after 8b/10b or 128b/130b encoding)
_LANE_BPS = {
    1: 2.5e9 * 0.8 / 8,
    2: 5e9 * 0.8 / 8,
    3: 8e9 * 128 / 130 / 8,
    4: 16e9 * 128 / 130 / 8,
    5: 32e9 * 128 / 130 / 8,
    6: 64e9 * 242 / 256 / 8,
}


@dataclass(frozen=True)
class GpuStatic:
    """Fields read once per device."""

    index: int
    name: str
    uuid: str
    memory_total: int | None  # bytes
    power_limit_w: float | None
    pcie_gen: int | None  # current link generation when the sampler opened
    pcie_width: int | None
    pcie_gen_max: int | None
    pcie_width_max: int | None
    power_default_limit_w: float | None = None  # the board's default (the enforced limit may be set lower)
    sm_clock_max_mhz: float | None = None
    mem_clock_max_mhz: float | None = None


def throttle_names(mask: int) -> tuple[str, ...]:
    """NVML's clock event reasons mask as names ("sw_power_cap", ...; an unknown bit as its hex value)."""
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    known = sum(bit for bit, _ in THROTTLE_REASONS)
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(hex(bit))
            rest &= ~bit
        bit <<= 1
    return tuple(names)


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_memory: int | None  # bytes; None where NVML cannot tell (some MIG / container setups)
    engine: bool  # one of the watched engine's processes


@dataclass(frozen=True)
class GpuSample:
    index: int
    name: str
    util_gpu: float | None  # percent
    util_mem: float | None  # percent (memory controller busy)
    memory_used: int | None  # bytes
    memory_total: int | None
    power_w: float | None
    power_limit_w: float | None
    temperature_c: float | None
    sm_clock_mhz: float | None
    pcie_gen: int | None
    pcie_width: int | None
    pcie_tx_bps: float | None  # bytes per second since the previous sample; None on the first one
    pcie_rx_bps: float | None
    pcie_may_alias: bool = False  # a read gap long enough for a missed 32-bit wrap: the rate is a lower bound
    processes: tuple[GpuProcess, ...] = ()
    engine_memory: int | None = None  # bytes used by the engine's processes on this GPU
    errors: tuple[str, ...] = ()  # fields NVML refused this time ("power: Not Supported")
    mem_clock_mhz: float | None = None
    # why the clocks are held back now (NVML's clock event reasons, `throttle_names`); () none, None unreadable
    throttle_reasons: tuple[str, ...] | None = None
    # the fixed facts beside the live values (GpuStatic): the link's maximum, the default power limit, the
    # maximum clocks; pcie_gen / pcie_width above are the link's current state (read every LINK_REFRESH_S)
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    power_default_limit_w: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_max_mhz: float | None = None


@dataclass(frozen=True)
class GpuReading:
    gpus: tuple[GpuSample, ...]
    error: str | None  # "no GPU telemetry (reason)" when NVML is not usable at all
    cost_s: float  # wall time of this read


def _nvml_reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _field_value(fv: Any) -> float | None:
    if fv.nvmlReturn != 0:
        return None
    v = fv.value
    value: float = {0: v.dVal, 1: v.uiVal, 2: v.ulVal, 3: v.ullVal, 4: v.sllVal, 5: v.siVal, 6: v.usVal}.get(
        int(fv.valueType), v.ullVal
    )
    return value


class GpuSampler:
    """Owns NVML for one sampler thread: `open()` once, `sample()` every period, `close()` at the end."""

    def __init__(self) -> None:
        self.error: str | None = None
        self.static: tuple[GpuStatic, ...] = ()
        self._handles: list[Any] = []
        # index -> [t, raw tx, raw rx, unwrapped tx total, unwrapped rx total, longest read gap since sample]
        self._pcie: dict[int, list[float]] = {}
        self._pcie_last_sample: dict[int, tuple[float, float, float]] = {}  # index -> (t, tx total, rx total)
        self._pcie_peak_bps: float = 0.0  # highest rate of the last sample, any GPU and direction
        self._pcie_unsupported: dict[int, str] = {}  # index -> why the counters cannot be read
        self._link: dict[int, tuple[float, int | None, int | None]] = {}  # index -> (read at, gen, width)
        self._opened = False

    # -- lifecycle -------------------------------------------------------------------------------
    def open(self) -> str | None:
        """Initialise NVML and read the static fields. Returns the error (also kept in `self.error`)."""
        if self._opened:
            return self.error
        self._opened = True
        if pynvml is None:
            self.error = "no GPU telemetry (nvidia-ml-py is not installed)"
            return self.error
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            self.error = f"no GPU telemetry ({_nvml_reason(exc)})"
            return self.error
        try:
            count = pynvml.nvmlDeviceGetCount()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except pynvml.NVMLError as exc:
            self.error = f"no GPU telemetry ({_nvml_reason(exc)})"
            self._shutdown()
            return self.error
        if not handles:
            self.error = "no GPU telemetry (NVML sees no GPU)"
            self._shutdown()
            return self.error
        self._handles = handles
        self.static = tuple(self._read_static(i, h) for i, h in enumerate(handles))
        return None

    def close(self) -> None:
        """Let NVML go; a later `sample()` opens it again."""
        if self._handles:
            self._handles = []
            self._shutdown()
        self._opened = False
        self.error = None

    @staticmethod
    def _shutdown() -> None:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass

    @staticmethod
    def _try(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except pynvml.NVMLError:
            return None

    def _read_static(self, index: int, h: Any) -> GpuStatic:
        t = self._try
        name = t(pynvml.nvmlDeviceGetName, h)
        mem = t(pynvml.nvmlDeviceGetMemoryInfo, h)
        limit = t(pynvml.nvmlDeviceGetEnforcedPowerLimit, h)
        default = self._optional("nvmlDeviceGetPowerManagementDefaultLimit", h)
        sm_max = self._optional("nvmlDeviceGetMaxClockInfo", h, pynvml.NVML_CLOCK_SM)
        mem_max = self._optional("nvmlDeviceGetMaxClockInfo", h, pynvml.NVML_CLOCK_MEM)
        return GpuStatic(
            index=index,
            name=(name.decode() if isinstance(name, bytes) else name) or f"GPU {index}",
            uuid=_text(t(pynvml.nvmlDeviceGetUUID, h)) or "",
            memory_total=int(mem.total) if mem is not None else None,
            power_limit_w=limit / 1000.0 if limit is not None else None,
            pcie_gen=t(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
            pcie_width=t(pynvml.nvmlDeviceGetCurrPcieLinkWidth, h),
            pcie_gen_max=t(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
            pcie_width_max=t(pynvml.nvmlDeviceGetMaxPcieLinkWidth, h),
            power_default_limit_w=default / 1000.0 if default is not None else None,
            sm_clock_max_mhz=float(sm_max) if sm_max is not None else None,
            mem_clock_max_mhz=float(mem_max) if mem_max is not None else None,
        )

    @classmethod
    def _optional(cls, name: str, *args: Any) -> Any:
        """A call an older nvidia-ml-py (or a stand-in) may not have: None when missing or refused."""
        fn = getattr(pynvml, name, None)
        return None if fn is None else cls._try(fn, *args)

    def _link_now(self, st: GpuStatic, h: Any) -> tuple[int | None, int | None]:
        """The link's current generation and width, read again every LINK_REFRESH_S (the static read first)."""
        now = time.monotonic()
        seen = self._link.get(st.index)
        if seen is None:
            self._link[st.index] = (now, st.pcie_gen, st.pcie_width)
            return st.pcie_gen, st.pcie_width
        if now - seen[0] < LINK_REFRESH_S:
            return seen[1], seen[2]
        gen = self._try(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h)
        width = self._try(pynvml.nvmlDeviceGetCurrPcieLinkWidth, h)
        self._link[st.index] = (now, gen, width)
        return gen, width

    @staticmethod
    def _throttle(h: Any, errors: list[str]) -> tuple[str, ...] | None:
        fn = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        if fn is None:
            return None
        try:
            return throttle_names(int(fn(h)))
        except pynvml.NVMLError as exc:
            errors.append(f"clock event reasons: {_nvml_reason(exc)}")
            return None

    # -- sampling --------------------------------------------------------------------------------
    def sample(self, engine_pids: Iterable[int] = ()) -> GpuReading:
        t0 = time.perf_counter()
        if not self._opened:
            self.open()
        if self.error is not None:
            return GpuReading((), self.error, time.perf_counter() - t0)
        pids = set(engine_pids)
        self._reset_peak()
        gpus = tuple(self._sample_one(st, h, pids) for st, h in zip(self.static, self._handles))
        return GpuReading(gpus, None, time.perf_counter() - t0)

    def _sample_one(self, st: GpuStatic, h: Any, pids: set[int]) -> GpuSample:
        errors: list[str] = []

        def read(what: str, fn: Any, *args: Any) -> Any:
            try:
                return fn(*args)
            except pynvml.NVMLError as exc:
                errors.append(f"{what}: {_nvml_reason(exc)}")
                return None

        util = read("utilization", pynvml.nvmlDeviceGetUtilizationRates, h)
        mem = read("memory", self._memory_info, h)
        power = read("power", pynvml.nvmlDeviceGetPowerUsage, h)
        temp = read("temperature", pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU)
        sm = read("sm clock", pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM)
        mem_clock = read("memory clock", pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_MEM)
        throttle = self._throttle(h, errors)
        link_gen, link_width = self._link_now(st, h)
        tx_bps, rx_bps, alias = self._pcie_rates(st, h, errors)
        procs = self._processes(h, pids, errors)
        engine_mem = None
        if pids:
            engine_mem = sum(p.used_memory or 0 for p in procs if p.engine)
        return GpuSample(
            index=st.index,
            name=st.name,
            util_gpu=float(util.gpu) if util is not None else None,
            util_mem=float(util.memory) if util is not None else None,
            memory_used=int(mem.used) if mem is not None else None,
            memory_total=int(mem.total) if mem is not None else st.memory_total,
            power_w=power / 1000.0 if power is not None else None,
            power_limit_w=st.power_limit_w,
            temperature_c=float(temp) if temp is not None else None,
            sm_clock_mhz=float(sm) if sm is not None else None,
            pcie_gen=link_gen,
            pcie_width=link_width,
            pcie_tx_bps=tx_bps,
            pcie_rx_bps=rx_bps,
            pcie_may_alias=alias,
            processes=procs,
            engine_memory=engine_mem,
            errors=tuple(errors),
            mem_clock_mhz=float(mem_clock) if mem_clock is not None else None,
            throttle_reasons=throttle,
            pcie_gen_max=st.pcie_gen_max,
            pcie_width_max=st.pcie_width_max,
            power_default_limit_w=st.power_default_limit_w,
            sm_clock_max_mhz=st.sm_clock_max_mhz,
            mem_clock_max_mhz=st.mem_clock_max_mhz,
        )

    @staticmethod
    def _memory_info(h: Any) -> Any:
        return memory_info(h, pynvml)

    def _read_pcie(self, index: int, h: Any) -> str | None:
        """Read both counters and fold them into the unwrapped totals. Returns an error, or None."""
        if index in self._pcie_unsupported:
            return self._pcie_unsupported[index]  # asked once, not every second
        try:
            tx_fv, rx_fv = pynvml.nvmlDeviceGetFieldValues(h, [PCIE_TX_FIELD, PCIE_RX_FIELD])
        except pynvml.NVMLError as exc:
            return f"pcie counters: {_nvml_reason(exc)}"
        now = time.monotonic()
        tx, rx = _field_value(tx_fv), _field_value(rx_fv)
        if tx is None or rx is None:
            bad = tx_fv if tx is None else rx_fv
            reason = f"pcie counters: {_nvml_reason(pynvml.NVMLError(bad.nvmlReturn))}"
            self._pcie_unsupported[index] = reason
            return reason
        wrap = COUNTER_WRAP.get(int(tx_fv.valueType), 1 << 64)
        st = self._pcie.get(index)
        if st is None:
            self._pcie[index] = [now, tx, rx, 0.0, 0.0, 0.0]
            return None
        st[3] += (tx - st[1]) % wrap
        st[4] += (rx - st[2]) % wrap
        st[5] = max(st[5], now - st[0])
        st[0], st[1], st[2] = now, tx, rx
        return None

    def _pcie_rates(self, static: GpuStatic, h: Any, errors: list[str]) -> tuple[float | None, float | None, bool]:
        error = self._read_pcie(static.index, h)
        if error is not None:
            errors.append(error)
            return None, None, False
        st = self._pcie[static.index]
        now, tx_total, rx_total, gap = st[0], st[3], st[4], st[5]
        st[5] = 0.0
        prev = self._pcie_last_sample.get(static.index)
        self._pcie_last_sample[static.index] = (now, tx_total, rx_total)
        if prev is None or now <= prev[0]:
            return None, None, False  # first read: no rate yet
        dt = now - prev[0]
        tx_bps, rx_bps = (tx_total - prev[1]) / dt, (rx_total - prev[2]) / dt
        self._pcie_peak_bps = max(self._pcie_peak_bps, tx_bps, rx_bps)
        # heavy traffic and a read gap in which the link could move a whole wrap (4 GiB): one may be hidden
        alias = gap * self._link_bps(static) >= (1 << 32) and max(tx_bps, rx_bps) * gap >= (1 << 32) / 8
        return tx_bps, rx_bps, alias

    @staticmethod
    def _link_bps(static: GpuStatic) -> float:
        gen = static.pcie_gen_max or static.pcie_gen or 5
        width = static.pcie_width_max or static.pcie_width or 16
        return _LANE_BPS.get(gen, _LANE_BPS[6]) * width * 1.1  # link bytes run ~8 % over payload

    def pcie_poll_interval(self, period_s: float) -> float | None:
        """How often the sampler thread should call `poll_pcie()` between samples: None while the last rates
        were far from a wrap per period; else an interval in which the link cannot move 4 GiB (with margin)."""
        if not self.static or not self._pcie or self._pcie_peak_bps * period_s < (1 << 32) / 8:
            return None
        fastest = max(self._link_bps(st) for st in self.static)
        return max(0.01, 0.8 * (1 << 32) / fastest)

    def poll_pcie(self) -> None:
        """Only fold in the PCIe counters (about 0.3 ms per GPU): keeps the totals exact under heavy traffic."""
        for st, h in zip(self.static, self._handles):
            self._read_pcie(st.index, h)

    def wait_until(self, due: float, stop: threading.Event, period_s: float) -> None:
        """Sleep until `due` (monotonic) or `stop`; under heavy PCIe traffic, fold in the 32-bit counters on
        the way (see `pcie_poll_interval`). The sampler thread calls this between samples."""
        while not stop.is_set():
            now = time.monotonic()
            if now >= due:
                return
            step = self.pcie_poll_interval(period_s)
            if step is None:
                stop.wait(due - now)
                return
            stop.wait(min(step, due - now))
            if time.monotonic() < due:
                self.poll_pcie()

    def _reset_peak(self) -> None:
        self._pcie_peak_bps = 0.0

    @staticmethod
    def _processes(h: Any, pids: set[int], errors: list[str]) -> tuple[GpuProcess, ...]:
        seen: dict[int, GpuProcess] = {}
        for what, fn in (
            ("compute processes", pynvml.nvmlDeviceGetComputeRunningProcesses),
            ("graphics processes", pynvml.nvmlDeviceGetGraphicsRunningProcesses),
        ):
            try:
                procs = fn(h)
            except pynvml.NVMLError as exc:
                errors.append(f"{what}: {_nvml_reason(exc)}")
                continue
            for p in procs:
                used = getattr(p, "usedGpuMemory", None)
                seen.setdefault(
                    int(p.pid), GpuProcess(int(p.pid), int(used) if used is not None else None, int(p.pid) in pids)
                )
        return tuple(sorted(seen.values(), key=lambda p: p.pid))


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value
