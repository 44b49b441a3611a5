"""exllamav3's CPU-expert side alone, one call per child process, so a crash in one does not hide the rest.

On the H200 machine every start of exl3-gpu-moe with CPU experts died with SIGSEGV inside
`exllamav3_ext.exl3_moe_cpu_core_order()` (docs/gpu-run.md, "exllamav3's CPU experts"), while the same C++ function
compiled alone (`g++` of its source, here) reads the topology cleanly. This probe asks the compiled extension
itself, call by call: its ISA checks, the core order, and the pool's own stress test; and it compiles the
function alone from the wheel's source beside it, to tell the machine from the extension's build.

    python scripts/exl3_cpu_probe.py [--source DIR_OF_exllamav3_ext]     (with the engine's python and
                                                                            TORCH_CUDA_ARCH_LIST as it was built)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

CALLS = {
    "isa": "print('avx2', e.exl3_moe_cpu_has_avx2(), 'avx512bw', e.exl3_moe_cpu_has_avx512_bw(),"
    " 'vnni', e.exl3_moe_cpu_has_avx512_vnni(), 'vbmi', e.exl3_moe_cpu_has_avx512_vbmi())",
    "core order": "print(e.exl3_moe_cpu_core_order())",
    "pool stress (4 threads)": "print('anomalies', e.exl3_moe_cpu_pool_stress(4, 200, 0, 0))",
}
HARNESS_MAIN = """
int main() {
    auto co = physical_core_order();
    printf("n_phys %d:", co.n_phys);
    for (int c : co.order) printf(" %d", c);
    printf("\\n");
}
"""


def call(name: str, code: str, timeout_s: float) -> None:
    prog = f"import faulthandler; faulthandler.enable(); from exllamav3.ext import exllamav3_ext as e; {code}"
    try:
        done = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        print(f"{name}: no answer in {timeout_s:.0f} s")
        return
    how = "ok" if done.returncode == 0 else f"exit {done.returncode}"
    print(f"{name}: {how}: {done.stdout.strip()}")
    if done.returncode != 0:
        print("\n".join("    " + line for line in done.stderr.strip().splitlines()[-12:]))


def harness(source: Path) -> None:
    """physical_core_order() compiled alone from the wheel's moe_mul1.cpp (Linux branch), then run."""
    text = (source / "cpu" / "moe_mul1.cpp").read_text()
    found = re.search(r"^struct CoreOrder.*?(?=^inline bool pin_threads_enabled)", text, re.S | re.M)
    if not found:
        print("harness: CoreOrder not found in the source")
        return
    head = "".join(f"#include <{h}>\n" for h in ("vector", "map", "string", "fstream", "thread", "cstdio", "cstdint"))
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "core_order.cpp", Path(tmp) / "core_order"
        src.write_text(head + found.group(0) + HARNESS_MAIN)
        built = subprocess.run(["g++", "-O2", "-g", str(src), "-o", str(exe)], capture_output=True, text=True)
        if built.returncode != 0:
            print("harness: g++ failed:", built.stderr.strip()[-400:])
            return
        ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
        print(f"harness (g++ of the same function): exit {ran.returncode}: {ran.stdout.strip()}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", type=Path, help="exllamav3_ext's source folder (default: the installed package's)")
    p.add_argument("--timeout", type=float, default=600, help="per call: the first import may compile")
    args = p.parse_args(argv)
    for name, code in CALLS.items():
        call(name, code, args.timeout)
    source = args.source
    if source is None:
        import importlib.util

        spec = importlib.util.find_spec("exllamav3")
        source = Path(spec.origin).parent / "exllamav3_ext" if spec and spec.origin else None
    if source is not None and source.is_dir():
        harness(source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
