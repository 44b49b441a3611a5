"""exllamav3's CPU-expert side alone, one call per child process, so a crash in one does not hide the rest.

On the H200 machine every start of exl3-gpu-moe with CPU experts died with SIGSEGV inside
`exllamav3_ext.exl3_moe_cpu_core_order()` (docs/gpu-run.md, "exllamav3's CPU experts"), while the same C++ function
compiled alone (`g++` of its source, here) reads the topology cleanly. This probe asks the compiled extension
itself, call by call: its ISA checks, the core order, the pool's own stress test and the import that crashed
(exllamav3.model.moe_cpu_host). A call that dies by a signal runs again under cuda-gdb (the machine's only
debugger; it debugs programs with no GPU code too) for the native backtrace and the faulting instruction. Beside
them: the libraries the extension links and the C++ runtime the process really maps (a libstdc++ older than the
one the extension was compiled against crashes in its first use of the runtime), and the function compiled
alone from the wheel's source with the extension's own flags (-Ofast) and with -O2, to tell the machine from the
extension's build.

    python scripts/exl3_cpu_probe.py [--source DIR_OF_exllamav3_ext] [--out DIR]   (with the engine's python and
                                                                                    TORCH_CUDA_ARCH_LIST as built)

On a machine without CUDA, `--cpu-only` builds the CPU side alone (moe_mul1.cpp and a binding of the calls
above, as a torch extension with the extension's -Ofast; a few minutes) and asks it the same, in place of the
whole extension: with the engine venv's torch and the wheel's source,

    .venv-engine/bin/python scripts/exl3_cpu_probe.py --cpu-only --source DIR/exllamav3/exllamav3_ext

`--workarounds FILE` writes what the rest of the run should set (shell lines, `workarounds()` says which) for
scripts/device_exl3.sh to source.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

IMPORT = "import faulthandler; faulthandler.enable(); from exllamav3.ext import exllamav3_ext as e; "
CALLS = {
    "isa": "print('avx2', e.exl3_moe_cpu_has_avx2(), 'avx512bw', e.exl3_moe_cpu_has_avx512_bw(),"
    " 'vnni', e.exl3_moe_cpu_has_avx512_vnni(), 'vbmi', e.exl3_moe_cpu_has_avx512_vbmi())",
    "core order": "print(e.exl3_moe_cpu_core_order())",
    # the pool pins its threads by default, and pinning reads the core order in C++ (moe_mul1.cpp)
    "pool stress (4 threads, pinned)": "print('anomalies', e.exl3_moe_cpu_pool_stress(4, 200, 0, 0))",
    "pool stress (4 threads, unpinned)": "print('anomalies', e.exl3_moe_cpu_pool_stress(4, 200, 0, 0))",
    "import moe_cpu_host": "import exllamav3.model.moe_cpu_host as h; print('threads', h.TUNING.threads)",
}
# EXL3_MOE_CPU_PIN is read once per process, at the pool's first use: each call sets its own
CALL_ENV = {
    "pool stress (4 threads, pinned)": {"EXL3_MOE_CPU_PIN": "1"},
    "pool stress (4 threads, unpinned)": {"EXL3_MOE_CPU_PIN": "0"},
}
# the C++ runtime the process maps once the extension is loaded, and the extension's own file
MAPS = (
    "import os; print('extension', e.__file__);"
    " libs = sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libstdc++' in l or 'libgcc_s' in l});"
    " print('\\n'.join(libs))"
)
HARNESS_MAIN = """
int main() {
    auto co = physical_core_order();
    printf("n_phys %d:", co.n_phys);
    for (int c : co.order) printf(" %d", c);
    printf("\\n");
}
"""
# --cpu-only: the calls above bound from moe_mul1.cpp alone, built by torch as the extension is (no CUDA)
CPU_ONLY_BINDING = """
#include <torch/extension.h>
#include <pybind11/stl.h>
#include "cpu/moe_mul1.h"
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("exl3_moe_cpu_core_order", &exl3_moe_cpu_core_order);
    m.def("exl3_moe_cpu_has_avx2", &exl3_moe_cpu_has_avx2);
    m.def("exl3_moe_cpu_has_avx512_bw", &exl3_moe_cpu_has_avx512_bw);
    m.def("exl3_moe_cpu_has_avx512_vnni", &exl3_moe_cpu_has_avx512_vnni);
    m.def("exl3_moe_cpu_has_avx512_vbmi", &exl3_moe_cpu_has_avx512_vbmi);
    m.def("exl3_moe_cpu_pool_stress", &exl3_moe_cpu_pool_stress);
}
"""
GDB_COMMANDS = ("set pagination off", "run", "bt 40", "info registers rip rsp", "x/8i $pc", "info sharedlibrary")


def cpu_only_import(source: Path, build: Path) -> str:
    """The code that loads the CPU side alone as `e` (built on first use into BUILD, reused after)."""
    build.mkdir(parents=True, exist_ok=True)
    binding = build / "binding.cpp"
    binding.write_text(CPU_ONLY_BINDING)
    sources = [str(source / "cpu" / "moe_mul1.cpp"), str(binding)]
    return (
        "import faulthandler; faulthandler.enable(); from torch.utils.cpp_extension import load;"
        f" e = load('exl3_cpu_only', {sources!r}, extra_include_paths=[{str(source)!r}],"
        f" extra_cflags=['-Ofast'], build_directory={str(build)!r}); "
    )


def run(
    argv: list[str], timeout_s: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return None


def backtrace(name: str, prog: str, out: Path | None, env: dict[str, str]) -> None:
    """The crash again under cuda-gdb: the native frames, the faulting instruction and what was loaded."""
    gdb = shutil.which("cuda-gdb") or shutil.which("gdb")
    if gdb is None:
        print("    (no debugger on this machine for a native backtrace)")
        return
    argv = [gdb, "-batch", "-nx"]
    for command in GDB_COMMANDS:
        argv += ["-ex", command]
    done = run([*argv, "--args", sys.executable, "-c", prog], 150, env)
    if done is None:
        print(f"    {Path(gdb).name}: no answer in 150 s")
        return
    text = done.stdout + done.stderr
    if out is not None:
        (out / f"gdb-{re.sub(r'[^a-z0-9]+', '-', name)}.txt").write_text(text)
    frames = [line for line in text.splitlines() if re.match(r"#\d+ ", line)][:16]
    rest = [line for line in text.splitlines() if re.match(r"rip|rsp|=> |\s+0x|Thread .* received|Program", line)]
    print("\n".join("    gdb: " + line[:240] for line in rest[:3] + frames + rest[3:14]))


def call(name: str, code: str, timeout_s: float, out: Path | None, load: str = IMPORT) -> int | None:
    """Run one call in a process of its own; its exit status (negative: the signal that killed it), None if
    it did not answer."""
    prog = load + code
    env = {**os.environ, **CALL_ENV.get(name, {})}
    done = run([sys.executable, "-c", prog], timeout_s, env)
    if done is None:
        print(f"{name}: no answer in {timeout_s:.0f} s")
        return None
    how = "ok" if done.returncode == 0 else f"exit {done.returncode}"
    print(f"{name}: {how}: {done.stdout.strip()}")
    if done.returncode != 0:
        print("\n".join("    " + line for line in done.stderr.strip().splitlines()[-12:]))
    if done.returncode < 0:  # killed by a signal: where, natively
        backtrace(name, prog, out, env)
    return done.returncode


def workarounds(results: dict[str, int | None]) -> list[str]:
    """What the device script sets for the rest of the run, from how the calls ended (shell lines):
    - the core order killed by a signal: the adapter reads the topology in Python (frank.engine.exl3.core_order);
    - the pinned pool killed and the unpinned pool clean: pinning (the C++ read of the topology) is what
      crashes, so only schedule 1 (EXL3_MOE_CPU_PIN=0) runs."""
    lines = []
    if (results.get("core order") or 0) < 0:
        lines.append("export FRANK_EXL3_CORE_ORDER=python")
    if (results.get("pool stress (4 threads, pinned)") or 0) < 0 and results.get(
        "pool stress (4 threads, unpinned)"
    ) == 0:
        lines.append("SCHEDS=1")
    return lines


def linked(extension: str) -> None:
    ldd = run(["ldd", extension], 30)
    if ldd is not None:
        wanted = [line.strip() for line in ldd.stdout.splitlines() if re.search(r"stdc\+\+|gcc_s|libc\.|torch", line)]
        print("ldd:", *wanted, sep="\n    ")
    # the compiler that built it: the machine's own compile, or one carried from elsewhere (scripts/build_exl3_ext.sh)
    comment = run(["readelf", "-p", ".comment", extension], 30)
    if comment is not None:
        print("built by:", *sorted(set(re.findall(r"GCC: \(.*?\) [\d.]+", comment.stdout))) or ["(no .comment)"])
    strings = run(["strings", extension], 60)
    if strings is not None:
        needs = sorted(set(re.findall(r"GLIBCXX_3\.4\.\d+", strings.stdout)), key=lambda v: int(v.rsplit(".", 1)[1]))
        print("the extension needs up to:", needs[-1] if needs else "(none found)")


def harness(source: Path) -> None:
    """physical_core_order() compiled alone from the wheel's moe_mul1.cpp (Linux branch), then run."""
    text = (source / "cpu" / "moe_mul1.cpp").read_text()
    found = re.search(r"^struct CoreOrder.*?(?=^inline bool pin_threads_enabled)", text, re.S | re.M)
    if not found:
        print("harness: CoreOrder not found in the source")
        return
    head = "".join(f"#include <{h}>\n" for h in ("vector", "map", "string", "fstream", "thread", "cstdio", "cstdint"))
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "core_order.cpp"
        src.write_text(head + found.group(0) + HARNESS_MAIN)
        for flags in (["-O2", "-g"], ["-Ofast", "-fPIC", "-std=c++17"]):
            exe = Path(tmp) / ("core_order" + flags[0])
            built = run(["g++", *flags, str(src), "-o", str(exe)], 120)
            if built is None or built.returncode != 0:
                print(f"harness {' '.join(flags)}: g++ failed:", built.stderr.strip()[-400:] if built else "timeout")
                continue
            ran = run([str(exe)], 30)
            result = f"exit {ran.returncode}: {ran.stdout.strip()}" if ran else "no answer in 30 s"
            print(f"harness (g++ {' '.join(flags)} of the same function): {result}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", type=Path, help="exllamav3_ext's source folder (default: the installed package's)")
    p.add_argument("--out", type=Path, help="folder for the debugger's whole output")
    p.add_argument("--timeout", type=float, default=600, help="per call: the first import may compile")
    p.add_argument("--cpu-only", action="store_true", help="build and ask the CPU side alone (no CUDA needed)")
    p.add_argument("--workarounds", type=Path, help="write what the rest of the run should set here (shell lines)")
    args = p.parse_args(argv)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, int | None] = {}
    if args.cpu_only:
        if args.source is None:
            p.error("--cpu-only needs --source (the wheel's exllamav3/exllamav3_ext)")
        build = (args.out or Path(tempfile.gettempdir()) / "exl3-cpu-only") / "build"
        load = cpu_only_import(args.source, build)
        for name, code in CALLS.items():
            if name != "import moe_cpu_host":  # exllamav3's own module loads the whole extension
                results[name] = call(name, code, args.timeout, args.out, load)
        harness(args.source)
        return report_workarounds(results, args.workarounds)
    print(f"g++: {(run(['g++', '-dumpfullversion'], 30) or subprocess.CompletedProcess([], 1, '?')).stdout.strip()}")
    maps = run([sys.executable, "-c", IMPORT + MAPS], args.timeout)
    if maps is not None and maps.returncode == 0:
        print(maps.stdout.strip())
        extension = maps.stdout.split()[1]
        linked(extension)
    for name, code in CALLS.items():
        results[name] = call(name, code, args.timeout, args.out)
    source = args.source
    if source is None:
        import importlib.util

        spec = importlib.util.find_spec("exllamav3")
        source = Path(spec.origin).parent / "exllamav3_ext" if spec and spec.origin else None
    if source is not None and source.is_dir():
        harness(source)
    return report_workarounds(results, args.workarounds)


def report_workarounds(results: dict[str, int | None], path: Path | None) -> int:
    lines = workarounds(results)
    print("workarounds:", "; ".join(lines) if lines else "none")
    if path is not None:
        path.write_text("".join(line + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
