"""exllamav3's built extension as carried parts (scripts/exl3_ext_parts.sh), the format the device script
unpacks, and the offline build's refusals (scripts/build_exl3_ext.sh) before it downloads anything."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PARTS = REPO / "scripts/exl3_ext_parts.sh"
BUILD = REPO / "scripts/build_exl3_ext.sh"


def _parts(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(PARTS), *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120
    )


@pytest.fixture()
def shared_object(tmp_path: Path) -> Path:
    """A real ELF shared object with debug sections, compiled here (what strip acts on)."""
    if not shutil.which("cc") or not shutil.which("strip"):
        pytest.skip("needs cc and strip")
    src = tmp_path / "ext.c"
    src.write_text("".join(f"int f{i}(int x) {{ return x * {i} + {i % 7}; }}\n" for i in range(400)))
    so = tmp_path / "exllamav3_ext.so"
    subprocess.run(["cc", "-g", "-O1", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    return so


def test_packed_parts_unpack_to_the_stripped_extension(shared_object, tmp_path):
    out = tmp_path / "carry"
    packed = _parts("pack", str(shared_object), str(out), env={"EXL3_EXT_PART_BYTES": "2000"})
    assert packed.returncode == 0, packed.stderr
    parts = sorted(p.name for p in out.iterdir())
    assert len(parts) > 1 and all(p.startswith("exl3-ext.part-") for p in parts)
    unpacked = tmp_path / "site/exllamav3_ext.so"
    unpacked.parent.mkdir()
    assert _parts("unpack", str(out), str(unpacked)).returncode == 0
    stripped = tmp_path / "stripped.so"
    subprocess.run(["strip", "--strip-debug", "-o", str(stripped), str(shared_object)], check=True)
    assert unpacked.read_bytes() == stripped.read_bytes()
    assert stripped.stat().st_size < shared_object.stat().st_size  # the debug sections are what strip took
    assert not (tmp_path / "site/exllamav3_ext.so.tmp").exists()


def test_packing_again_leaves_no_part_of_an_older_build(shared_object, tmp_path):
    out = tmp_path / "carry"
    out.mkdir()
    (out / "exl3-ext.part-zz").write_bytes(b"an older build's last part")
    assert _parts("pack", str(shared_object), str(out)).returncode == 0
    assert [p.name for p in out.iterdir()] == ["exl3-ext.part-aa"]


def test_parts_over_the_carry_are_refused_and_nothing_is_written(shared_object, tmp_path):
    out = tmp_path / "carry"
    refused = _parts("pack", str(shared_object), str(out), env={"EXL3_EXT_PARTS_LIMIT": "100"})
    assert refused.returncode == 3
    assert "too big to carry" in refused.stderr and str(shared_object) in refused.stderr
    assert not out.exists()


def test_unpacking_a_folder_without_parts_names_it(tmp_path):
    failed = _parts("unpack", str(tmp_path), str(tmp_path / "exllamav3_ext.so"))
    assert failed.returncode == 1 and f"{tmp_path}: no exl3-ext.part-*" in failed.stderr
    assert not (tmp_path / "exllamav3_ext.so").exists()


def test_the_offline_build_refuses_an_nvcc_that_is_not_the_machines(tmp_path):
    python = shutil.which("python3")
    env = {**os.environ, "CUDA_HOME": str(tmp_path / "no-cuda"), "PY312": python or "/usr/bin/python3"}
    failed = subprocess.run(
        ["bash", str(BUILD), str(tmp_path / "out")], capture_output=True, text=True, env=env, cwd=REPO, timeout=60
    )
    assert failed.returncode == 1
    assert f"{tmp_path / 'no-cuda'}/bin/nvcc is not CUDA 13.0 (none): set CUDA_HOME" in failed.stderr
    assert not (tmp_path / "out").exists()


def test_the_offline_build_refuses_a_missing_python(tmp_path):
    env = {**os.environ, "PY312": str(tmp_path / "python3.12")}
    failed = subprocess.run(
        ["bash", str(BUILD), str(tmp_path / "out")], capture_output=True, text=True, env=env, cwd=REPO, timeout=60
    )
    assert failed.returncode == 1 and "no python3.12 (the H200 machine's Python): set PY312" in failed.stderr


def test_the_device_script_packs_and_unpacks_through_the_one_helper():
    device = (REPO / "scripts/device_exl3.sh").read_text()
    assert 'exl3_ext_parts.sh" unpack "$D" "$EXT_SO"' in device
    assert 'exl3_ext_parts.sh" pack "$EXT_DIR/exllamav3_ext.so" "$OUT"' in device
    assert "lzma" not in device  # the format lives in exl3_ext_parts.sh alone
