"""What the GPU machine's exllamav3 run depends on, checked here against exllamav3 1.6.5's own wheel
(`make exl3-wheel`): every extension call the CPU probe makes is one the wheel binds, and every file of the
checkout the device script runs exists. tests/unit/test_exl3_ext_check.py checks the linkage refusal."""

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


def test_every_checkout_file_the_exl3_device_scripts_run_exists():
    for script in ("device_exl3.sh", "stage_exl3_device.sh", "build_exl3_ext.sh"):
        text = (REPO / "scripts" / script).read_text()
        used = set(re.findall(r"\$TREE/([\w./-]+)", text)) | set(re.findall(r"\bscripts/[\w.-]+\.(?:sh|py|txt)", text))
        assert used, script
        missing = sorted(path for path in used if not (REPO / path).exists())
        assert not missing, f"{script} runs files the checkout lacks: {missing}"


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


def test_the_device_scripts_menu_replay_finds_the_replays_menus_fields():
    """scripts/console_shots.py --replay types into the replays menu by these ids, as an operator would."""
    shots = (REPO / "scripts/console_shots.py").read_text()
    menu = (REPO / "frank/console/screens/replays.py").read_text()
    used = set(re.findall(r'query_one\("#([\w-]+)"', shots))
    assert {"rep-draws", "rep-limit", "workloads"} <= used
    missing = sorted(i for i in used if f'id="{i}"' not in menu)
    assert not missing, f"the replays menu has no field {missing}"
    assert "--replay w01-mini" in (REPO / "scripts/device_exl3.sh").read_text()
