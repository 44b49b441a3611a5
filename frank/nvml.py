"""NVML's memory figures, read once: the one reading of GPU memory that the engine (the split's fit, before a
start and at ready) and the telemetry (every sample) share. pynvml is imported lazily: a machine without the
package or a driver gets the reason instead of figures."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MiB = float(1 << 20)


def memory_info(handle: Any, nvml: Any = None) -> Any:
    """nvmlDeviceGetMemoryInfo, v2 where the driver has it: v2 reports `used` without the driver's reserved
    memory, as nvidia-smi does (v1 counts the reserve as used). `nvml`: the pynvml module to call (the
    telemetry passes its own, which a recorded NVML replaces in tests)."""
    if nvml is None:
        import pynvml

        nvml = pynvml
    try:
        return nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
    except (nvml.NVMLError_FunctionNotFound, nvml.NVMLError_NotSupported, AttributeError, TypeError):
        return nvml.nvmlDeviceGetMemoryInfo(handle)


@dataclass(frozen=True)
class GpuMemory:
    index: int
    name: str
    total_mib: float
    used_mib: float
    free_mib: float

    def describe(self) -> str:
        return f"GPU {self.index} ({self.name})"


def gpu_memory(env: Mapping[str, str]) -> GpuMemory | str:
    """The memory of the GPU a process started with `env` loads on (the first of CUDA_VISIBLE_DEVICES, else
    GPU 0), or why there are none."""
    try:
        import pynvml
    except ImportError:
        return "no NVML (nvidia-ml-py is not installed)"
    visible = env.get("CUDA_VISIBLE_DEVICES")
    device = (visible if visible is not None else "0").split(",")[0].strip()
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return f"no NVML ({exc})"
    try:
        if device.startswith(("GPU-", "MIG-")):
            handle = pynvml.nvmlDeviceGetHandleByUUID(device)
        elif device.isdigit():
            handle = pynvml.nvmlDeviceGetHandleByIndex(int(device))
        else:
            return f"CUDA_VISIBLE_DEVICES={visible!r} names no GPU"
        mem = memory_info(handle, pynvml)
        name = pynvml.nvmlDeviceGetName(handle)
        return GpuMemory(
            index=int(pynvml.nvmlDeviceGetIndex(handle)),
            name=name.decode() if isinstance(name, bytes) else str(name),
            total_mib=int(mem.total) / MiB,
            used_mib=int(mem.used) / MiB,
            free_mib=int(mem.free) / MiB,
        )
    except pynvml.NVMLError as exc:
        return f"NVML: {exc}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass
