"""exllamav3's core order read in Python, for a machine where its own C++ read crashes.

exllamav3 1.6.5 asks its extension for the CPU topology (`exl3_moe_cpu_core_order()`, moe_mul1.cpp's
`physical_core_order()`): one logical CPU per physical core first, in CPU order, then every SMT sibling, and
the count of physical cores. moe_cpu_host.py calls it at import, in the server and again in its spawned CPU
MoE worker. On the H200 machine that call died with SIGSEGV (docs/gpu-run.md, "exllamav3's CPU experts").
With FRANK_EXL3_CORE_ORDER=python the adapter puts this reading of the same files in its place, in both
processes: the server module runs it at import, and the worker imports the server module as __mp_main__.

The C++ pool itself still reads the topology when it pins its threads (EXL3_MOE_CPU_PIN, schedule 2), so
this helps the unpinned schedule alone if the C++ read is what crashes.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

ENV = "FRANK_EXL3_CORE_ORDER"
SYSFS_CPU = Path("/sys/devices/system/cpu")


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return -1


def python_core_order(ncpu: int | None = None, root: Path = SYSFS_CPU) -> tuple[list[int], int]:
    """(order, n_phys) as physical_core_order() gives them on Linux without EXL3_MOE_CPU_SPREAD: a CPU whose
    topology is unreadable is taken as a core of its own."""
    ncpu = ncpu if ncpu is not None else (os.cpu_count() or 1)
    order: list[int] = []
    siblings: list[int] = []
    seen: set[tuple[int, int]] = set()
    for cpu in range(ncpu):
        core = _read_int(root / f"cpu{cpu}" / "topology" / "core_id")
        package = _read_int(root / f"cpu{cpu}" / "topology" / "physical_package_id")
        if core < 0:
            order.append(cpu)
            continue
        if (package, core) in seen:
            siblings.append(cpu)
        else:
            seen.add((package, core))
            order.append(cpu)
    return order + siblings, len(order)


def install(ext: ModuleType) -> None:
    """Put the Python reading in place of the extension's call (looked up on the module at each call)."""
    setattr(ext, "exl3_moe_cpu_core_order", python_core_order)  # noqa: B010 (a compiled module's attribute)


def install_if_asked() -> bool:
    """With FRANK_EXL3_CORE_ORDER=python, install into exllamav3's extension (imports it: torch, and a compile
    check); otherwise nothing is imported."""
    if os.environ.get(ENV) != "python":
        return False
    from exllamav3.ext import exllamav3_ext

    install(exllamav3_ext)
    return True
