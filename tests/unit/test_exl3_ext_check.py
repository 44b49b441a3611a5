"""The crash of exllamav3's CPU split, reproduced here and refused before it can happen (docs/exl3.md, "The crash
and its cause"): two tiny shared objects with the same function, `std::ifstream f(path); f >> v`, one built with
libstdc++ linked in statically as the GPU machine image's compiler does, one linked against the shared
libstdc++ as the system's g++ does. frank.engine.exl3.ext_check refuses the first by its linkage alone, and the
adapter's generator, the probe and the engine's start do so before anything of the CPU pool runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from frank.engine.exl3 import ext_check

REPO = Path(__file__).resolve().parents[2]
ENGINE_PY = REPO / ".venv-engine/bin/python"
SOURCE = """
#include <fstream>
extern "C" int read_int(const char* path) { std::ifstream f(path); int v = -1; f >> v; return v; }
"""
CORE_ID = "/sys/devices/system/cpu/cpu0/topology/core_id"

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("ext")
    src = out / "read_int.cpp"
    src.write_text(SOURCE)
    objects = {"dynamic": out / "dynamic.so", "static": out / "static.so"}
    for name, extra in (("dynamic", []), ("static", ["-static-libstdc++"])):
        subprocess.run(["g++", "-shared", "-fPIC", "-O2", *extra, str(src), "-o", str(objects[name])], check=True)
    return objects


def test_an_extension_with_libstdcxx_linked_in_is_refused_with_the_cause_and_the_fix(built):
    found = ext_check.linkage(built["static"])
    assert ext_check.LIBSTDCXX not in found.needed and found.runtime_symbols > 100
    with pytest.raises(ext_check.ExtensionCheckError) as refused:
        ext_check.refuse_static_libstdcxx(built["static"])
    text = str(refused.value)
    assert str(built["static"]) in text and "statically" in text and "CXX=/usr/bin/g++" in text


def test_an_extension_linked_against_the_shared_libstdcxx_passes(built):
    found = ext_check.refuse_static_libstdcxx(built["dynamic"])
    assert ext_check.LIBSTDCXX in found.needed and found.runtime_symbols == 0
    assert not found.static_libstdcxx


def test_the_check_reads_what_binutils_read(built):
    """The ELF reader against readelf -d: the same NEEDED list."""
    if shutil.which("readelf") is None:
        pytest.skip("needs readelf")
    for so in built.values():
        dynamic = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, check=True).stdout
        needed = [line.split("[", 1)[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line]
        assert list(ext_check.linkage(so).needed) == needed


def test_not_a_shared_object_is_named(tmp_path):
    bogus = tmp_path / "exllamav3_ext.so"
    bogus.write_bytes(b"not an elf file")
    with pytest.raises(ext_check.ExtensionCheckError, match="exllamav3_ext.so: not a readable ELF"):
        ext_check.linkage(bogus)
    with pytest.raises(ext_check.ExtensionCheckError, match="missing.so"):
        ext_check.linkage(tmp_path / "missing.so")


def test_the_command_exits_1_on_the_static_build_and_0_on_the_shared_one(built):
    def run(so: Path) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "frank.engine.exl3.ext_check", str(so)]
        return subprocess.run(argv, capture_output=True, text=True, cwd=REPO)

    refused, passed = run(built["static"]), run(built["dynamic"])
    assert refused.returncode == 1 and "statically" in refused.stderr, refused
    assert passed.returncode == 0 and "links libstdc++.so.6" in passed.stdout, passed


def test_the_generator_checks_the_extension_before_loading_the_model():
    """exl3_generator (which needs CUDA) refuses before model_init runs: the check is its first call."""
    text = (REPO / "frank/engine/exl3/exl3_generator.py").read_text()
    init = text[text.index("def __init__") :]
    assert init.index("refuse_static_libstdcxx(exllamav3_ext.__file__)") < init.index("model_init")


@pytest.mark.skipif(
    not (REPO / ".venv-engine/.stamp").exists() or not Path(CORE_ID).exists(),
    reason="needs the engine venv (make setup)",
)
def test_beside_torch_the_static_build_misreads_what_the_shared_one_reads(built):
    """The cause itself: with torch's libstdc++ loaded first, the static copy's `ifstream >> int` fails (on the
    GPU machine it crashed); the shared one reads the core id."""
    code = f"import ctypes, sys, torch; print(*(ctypes.CDLL(p).read_int({CORE_ID.encode()!r}) for p in sys.argv[1:]))"
    done = subprocess.run(
        [str(ENGINE_PY), "-c", code, str(built["dynamic"]), str(built["static"])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dynamic, static = (int(v) for v in done.stdout.split())
    expected = int(Path(CORE_ID).read_text())
    assert dynamic == expected and static != expected


# A stand-in `exllamav3` package (exllamav3 needs CUDA and cannot run here): its extension is the static build
# above, and its loader dies as the GPU machine's CPU pool did if it is ever reached.
STAND_IN_EXT = """
import types
exllamav3_ext = types.ModuleType("exllamav3_ext")
exllamav3_ext.__file__ = {so!r}
"""
STAND_IN_INIT = """
import os, signal
class _Init:  # the CPU pool's crash, if the loader is ever reached
    @staticmethod
    def add_args(*args, **kwargs): os.kill(os.getpid(), signal.SIGSEGV)
model_init = _Init()
Generator = None
"""


@pytest.mark.parametrize("build", ["static", "dynamic"])
def test_the_adapter_refuses_the_static_build_before_loading_the_model(built, tmp_path, build):
    pkg = tmp_path / "exllamav3"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(STAND_IN_INIT)
    (pkg / "ext.py").write_text(STAND_IN_EXT.format(so=str(built[build])))
    (pkg / "modules").mkdir()
    (pkg / "modules" / "__init__.py").write_text("")
    (pkg / "modules" / "block_sparse_mlp_cpu.py").write_text("EXPERT_STATS_DIR = None\n")
    argv = [sys.executable, "-m", "frank.engine.exl3.server", "--model", str(tmp_path), "--served-model-name", "m",
            "--port", "1", "--expert-stats-dir", str(tmp_path / "stats")]  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp_path}:{REPO}", "FRANK_CONTROL_TOKEN": "t"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    if build == "static":
        assert done.returncode == 1 and "[exl3_server] refused:" in done.stderr and "statically" in done.stderr
    else:  # passed the check, so it reached the loader (the stand-in's crash)
        assert done.returncode == -11, done.stderr[-2000:]
