"""The CPU-expert pool's size as exllamav3 chooses it, resolved on the machine that starts the engine (and
read again by the telemetry, which finds the pool's threads by it).

exllamav3 1.6.5's default (model/moe_cpu_affinity.py default_worker_threads): every physical core less the
cores it keeps for the host process (EXL3_MOE_HOST_CORES, default 1). A pool as large as the machine leaves the
host process no core: on the 16-vCPU GPU machine 16 threads decoded about 9x slower than 4 or 8
(docs/exl3.md, "Threads")."""

from __future__ import annotations

from collections.abc import Mapping

AUTO = "auto"
HOST_CORES_ENV = "EXL3_MOE_HOST_CORES"
THREADS_ENV = "EXL3_MOE_CPU_THREADS"


def physical_cores() -> int:
    import psutil

    return max(1, psutil.cpu_count(logical=False) or 1)


def host_cores(environ: Mapping[str, str]) -> int:
    try:
        return max(0, int(environ.get(HOST_CORES_ENV, "1")))
    except ValueError:
        return 1


def exl3_default_threads(environ: Mapping[str, str]) -> tuple[int, str]:
    """(threads, how they were derived) as exllamav3 picks them when EXL3_MOE_CPU_THREADS is unset."""
    cores, host = physical_cores(), host_cores(environ)
    return max(1, cores - host), f"{cores} physical cores less {HOST_CORES_ENV} ({host})"


def leaves_host_no_core(threads: int) -> str | None:
    """Why `threads` workers starve the host process, or None: a worker on every physical core."""
    cores = physical_cores()
    if threads < cores:
        return None
    return (
        f"{THREADS_ENV}={threads} leaves the host process no core ({cores} physical cores): on the 16-vCPU GPU "
        'machine 16 threads decoded about 9x slower than 8 (docs/exl3.md, "Threads")'
    )
