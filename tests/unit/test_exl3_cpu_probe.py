"""What the H200 machine's exllamav3 run depends on, checked here against exllamav3 1.6.5's own wheel
(`make exl3-wheel`): every extension call the CPU probe makes is one the wheel binds, its harness finds the
core-order function in the wheel's source and builds it, and every file of the checkout the device script
runs exists."""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from scripts import exl3_cpu_probe as probe

REPO = Path(__file__).resolve().parents[2]
WHEEL = REPO / ".device/exl3/exllamav3-1.6.5-py3-none-any.whl"
EXT = "exllamav3/exllamav3_ext"


@pytest.fixture(scope="module")
def ext_source(tmp_path_factory) -> Path:
    assert WHEEL.is_file(), f"{WHEEL} is missing: `make exl3-wheel` downloads it"
    out = tmp_path_factory.mktemp("wheel")
    with zipfile.ZipFile(WHEEL) as whl:
        for name in (f"{EXT}/bindings.cpp", f"{EXT}/cpu/moe_mul1.cpp", "exllamav3/model/moe_cpu_host.py"):
            whl.extract(name, out)
    return out / EXT


def test_every_extension_call_of_the_probe_is_bound_by_the_wheel(ext_source):
    bound = set(re.findall(r'm\.def\("(\w+)"', (ext_source / "bindings.cpp").read_text()))
    called = {name for code in [*probe.CALLS.values(), probe.MAPS] for name in re.findall(r"\be\.(exl3_\w+)", code)}
    assert called, "the probe calls no extension function"
    assert called <= bound, f"not bound by exllamav3 1.6.5: {sorted(called - bound)}"
    # the crashed import's own call, and the module-level tuning the probe reads
    host = (ext_source.parents[0] / "model/moe_cpu_host.py").read_text()
    assert "ext.exl3_moe_cpu_core_order()" in host and re.search(r"^TUNING = MoeCpuTuning\(\)", host, re.M)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
def test_the_harness_builds_the_wheels_core_order_function_and_reads_this_machine(ext_source, capsys):
    probe.harness(ext_source)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2, lines  # -O2 and the extension's -Ofast
    for line in lines:
        found = re.search(r": exit 0: n_phys (\d+): ([\d ]+)$", line)
        assert found, line
        assert int(found.group(1)) >= 1 and len(found.group(2).split()) >= int(found.group(1))


def test_a_source_without_the_function_is_said_so(tmp_path, capsys):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu/moe_mul1.cpp").write_text("int main() {}\n")
    probe.harness(tmp_path)
    assert capsys.readouterr().out.strip() == "harness: CoreOrder not found in the source"


def test_every_checkout_file_the_exl3_device_scripts_run_exists():
    for script in ("device_exl3.sh", "stage_exl3_device.sh", "build_exl3_ext.sh"):
        text = (REPO / "scripts" / script).read_text()
        used = set(re.findall(r"\$TREE/([\w./-]+)", text)) | set(re.findall(r"\bscripts/[\w.-]+\.(?:sh|py|txt)", text))
        assert used, script
        missing = sorted(path for path in used if not (REPO / path).exists())
        assert not missing, f"{script} runs files the checkout lacks: {missing}"


def test_the_python_core_order_reads_this_machine_as_the_wheels_cpp_does(ext_source, capsys):
    """The stand-in for a crashing exl3_moe_cpu_core_order() answers what the wheel's own C++ answers here."""
    from frank.engine.exl3.core_order import python_core_order

    if shutil.which("g++") is None:
        pytest.skip("no C++ compiler")
    probe.harness(ext_source)
    found = re.search(r"-O2 -g of the same function\): exit 0: n_phys (\d+): ([\d ]+)", capsys.readouterr().out)
    assert found, "the harness did not run"
    order, n_phys = python_core_order()
    assert (order, n_phys) == ([int(c) for c in found.group(2).split()], int(found.group(1)))


def test_the_python_core_order_puts_smt_siblings_last_and_takes_an_unreadable_cpu_as_a_core(tmp_path):
    from frank.engine.exl3.core_order import python_core_order

    # 2 packages x 2 cores x 2 threads, siblings numbered as Linux does on most machines (cpu n and n + 4)
    for cpu in range(8):
        topology = tmp_path / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "core_id").write_text(f"{cpu % 2}\n")
        (topology / "physical_package_id").write_text(f"{(cpu // 2) % 2}\n")
    assert python_core_order(8, tmp_path) == ([0, 1, 2, 3, 4, 5, 6, 7], 4)
    assert python_core_order(9, tmp_path) == ([0, 1, 2, 3, 8, 4, 5, 6, 7], 5)  # cpu8: no topology files


def test_the_stand_in_is_installed_only_when_asked(monkeypatch):
    import types

    from frank.engine.exl3 import core_order

    monkeypatch.delenv(core_order.ENV, raising=False)
    assert core_order.install_if_asked() is False  # and exllamav3 (absent here) was not imported
    ext = types.ModuleType("exllamav3_ext")
    core_order.install(ext)
    assert ext.exl3_moe_cpu_core_order() == core_order.python_core_order()


@pytest.mark.parametrize(
    ("results", "lines"),
    [
        ({"core order": 0, "pool stress (4 threads, pinned)": 0, "pool stress (4 threads, unpinned)": 0}, []),
        # the C++ topology read crashes, in the call and in the pinned pool: Python's reading, schedule 1 alone
        (
            {"core order": -11, "pool stress (4 threads, pinned)": -11, "pool stress (4 threads, unpinned)": 0},
            ["export FRANK_EXL3_CORE_ORDER=python", "SCHEDS=1"],
        ),
        # only the call crashes (its return's conversion, say): both schedules with Python's reading
        (
            {"core order": -11, "pool stress (4 threads, pinned)": 0, "pool stress (4 threads, unpinned)": 0},
            ["export FRANK_EXL3_CORE_ORDER=python"],
        ),
        # an error that is not a crash (exit 1), or no answer, changes nothing; neither does a pool that
        # crashes unpinned as well: no schedule would run
        ({"core order": 1, "pool stress (4 threads, pinned)": None}, []),
        ({"pool stress (4 threads, pinned)": -11, "pool stress (4 threads, unpinned)": -11}, []),
    ],
)
def test_what_the_probe_tells_the_device_script_to_set(results, lines):
    assert probe.workarounds(results) == lines


def test_the_probe_names_the_compiler_that_built_the_extension(tmp_path, capsys):
    """A build carried from elsewhere (scripts/build_exl3_ext.sh) and the machine's own compile read apart."""
    if not shutil.which("cc") or not shutil.which("readelf"):
        pytest.skip("needs cc and readelf")
    src, so = tmp_path / "ext.c", tmp_path / "exllamav3_ext.so"
    src.write_text("int f(int x) { return x + 1; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    version = subprocess.run(["cc", "-dumpfullversion"], capture_output=True, text=True, check=True).stdout.strip()
    probe.linked(str(so))
    built_by = [line for line in capsys.readouterr().out.splitlines() if line.startswith("built by:")]
    assert len(built_by) == 1 and re.fullmatch(rf"built by: GCC: \(.*\) {re.escape(version)}", built_by[0])
