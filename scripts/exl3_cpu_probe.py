"""exllamav3's CPU-expert side alone, one call per child process, so a crash in one does not hide the rest.

On the GPU machine every start of exl3-gpu-moe with CPU experts died with SIGSEGV inside
`exllamav3_ext.exl3_moe_cpu_core_order()`: the image's compiler had linked libstdc++ into the extension
statically, and beside torch's libstdc++ its first `std::ifstream >> int` crashes (docs/exl3.md, "The crash and
its cause"). So the probe first checks the extension's linkage without loading it (frank.engine.exl3.ext_check:
refused, exit 1, with the cause and the fix), then asks the extension itself, call by call: its ISA checks, the
core order, the pool's own stress test pinned and unpinned, and the import that crashed
(exllamav3.model.moe_cpu_host). A call that dies by a signal runs again under cuda-gdb (the machine's only
debugger; it debugs programs with no GPU code too) for the native backtrace and the faulting instruction. Beside
them: the libraries the extension links, the C++ runtime the process really maps and the compiler that built it.

    python scripts/exl3_cpu_probe.py [--out DIR]   (with the engine's python and TORCH_CUDA_ARCH_LIST as built)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

IMPORT = "import faulthandler; faulthandler.enable(); from exllamav3.ext import exllamav3_ext as e; "
CALLS = {
    "isa and core order": "print('avx512bw', e.exl3_moe_cpu_has_avx512_bw(), 'vbmi', e.exl3_moe_cpu_has_avx512_vbmi(),"
    " 'order', e.exl3_moe_cpu_core_order())",
    # the pool pins its threads by default, and pinning reads the core order in C++ (moe_mul1.cpp)
    "pool stress (4 threads, pinned)": "print('anomalies', e.exl3_moe_cpu_pool_stress(4, 200, 0, 0))",
    "import moe_cpu_host": "import exllamav3.model.moe_cpu_host as h; print('threads', h.TUNING.threads)",
}
# EXL3_MOE_CPU_PIN is read once per process, at the pool's first use: each call sets its own
CALL_ENV = {
    "pool stress (4 threads, pinned)": {"EXL3_MOE_CPU_PIN": "1"},
}
# the C++ runtime the process maps once the extension is loaded, and the extension's own file
MAPS = (
    "import os; print('extension', e.__file__);"
    " libs = sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libstdc++' in l or 'libgcc_s' in l});"
    " print('\\n'.join(libs))"
)
GDB_COMMANDS = ("set pagination off", "run", "bt 40", "info registers rip rsp", "x/8i $pc", "info sharedlibrary")


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


def call(name: str, code: str, timeout_s: float, out: Path | None) -> int | None:
    """Run one call in a process of its own; its exit status (negative: the signal that killed it), None if
    it did not answer."""
    prog = IMPORT + code
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="folder for the debugger's whole output")
    p.add_argument("--timeout", type=float, default=600, help="per call: the first import may compile")
    args = p.parse_args(argv)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    print(f"g++: {(run(['g++', '-dumpfullversion'], 30) or subprocess.CompletedProcess([], 1, '?')).stdout.strip()}")
    # the linkage before anything loads it: an extension with libstdc++ inside is refused here, with the fix
    check = run([sys.executable, "-m", "frank.engine.exl3.ext_check"], args.timeout)
    if check is None or check.returncode != 0:
        print("linkage:", (check.stdout + check.stderr).strip() if check else "no answer")
        return 1
    print("linkage:", check.stdout.strip())
    maps = run([sys.executable, "-c", IMPORT + MAPS], args.timeout)
    if maps is not None and maps.returncode == 0:
        print(maps.stdout.strip())
        linked(maps.stdout.split()[1])
    crashed = [name for name, code in CALLS.items() if (call(name, code, args.timeout, args.out) or 0) < 0]
    print("calls killed by a signal:", ", ".join(crashed) if crashed else "none")
    return 2 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
