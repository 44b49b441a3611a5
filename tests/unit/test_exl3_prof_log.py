"""exllamav3's own CPU-expert figures read from an engine log (frank.engine.exl3.prof_log): the lines are made
with the format strings of the wheel's own sources, so a change of exllamav3's wording fails here."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

from frank.engine.exl3 import prof_log

WHEEL = Path(__file__).resolve().parents[2] / ".device/exl3/exllamav3-1.6.5-py3-none-any.whl"


def wheel_text(name: str) -> str:
    if not WHEEL.exists():
        pytest.skip(f"no exllamav3 wheel at {WHEEL} (make exl3-wheel)")
    with zipfile.ZipFile(WHEEL) as whl:
        return whl.read(name).decode()


def pool_line(jobs: int, phases: tuple[float, ...]) -> str:
    """moe_mul1.cpp's printf, its C format applied by Python's % (%ld is %d here)."""
    src = wheel_text("exllamav3/exllamav3_ext/cpu/moe_mul1.cpp")
    call = re.search(r'printf\((" -- moe_cpu prof.*?),\s*prof_jobs', src, re.S)
    assert call, "moe_mul1.cpp no longer prints its moe_cpu prof line this way"
    fmt = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', call.group(1))).removesuffix("\\n").replace("%ld", "%d")
    prep_gu, gemv_gu, act, gemv_d, tf, accum = phases
    return fmt % (jobs, prep_gu, gemv_gu, 12.5, act, gemv_d, 11.0, tf, accum)


def split_line() -> str:
    src = wheel_text("exllamav3/modules/block_sparse_mlp_cpu.py")
    assert 'f" -- split prof [{k}] ({len(vals)} brackets, stream ms): "' in src
    assert 'f"med {vals[len(vals) // 2]:.3f} p90 {vals[int(len(vals) * 0.9)]:.3f} "' in src
    return " -- split prof [wait] (2048 brackets, stream ms): med 0.081 p90 0.140 max 0.912 | worst layers L3:0.120"


def test_the_pools_compute_and_the_stall_come_from_exllamav3s_own_lines(tmp_path, capsys):
    first, last = pool_line(512, (1.0, 20.0, 0.5, 10.0, 0.3, 0.2)), pool_line(1024, (1.0, 22.0, 0.5, 11.0, 0.3, 0.2))
    log = tmp_path / "engine.log"
    log.write_text("\n".join(["[frank] starting", first, "[exl3_server] POST /v1/chat/completions 200", last,
                              split_line()]))  # fmt: skip
    prof = prof_log.parse(log.read_text())
    assert [p.jobs for p in prof.pool] == [512, 1024]
    assert prof.pool[-1].us_per_job == {"prep_gu": 1.0, "gemv_gu": 22.0, "act+prep_d": 0.5, "gemv_d": 11.0,
                                        "tf_d/finish": 0.3, "accum": 0.2}  # fmt: skip
    assert prof.pool[-1].compute_s == pytest.approx(35.0 * 1024 / 1e6)
    assert prof.compute_between_s() == pytest.approx((35.0 * 1024 - 32.0 * 512) / 1e6)
    assert prof.split[0] == prof_log.SplitProf("wait", 2048, 0.081, 0.140, 0.912)
    assert prof_log.main([str(log)]) == 0
    assert "1024 jobs" in capsys.readouterr().out


def test_a_log_without_profile_lines_says_so_and_a_missing_log_is_an_error(tmp_path, capsys):
    log = tmp_path / "engine.log"
    log.write_text("[exl3_server] listening on 127.0.0.1:1 after 1.0 s (no draft model)\n")
    assert prof_log.parse(log.read_text()).compute_between_s() is None
    assert prof_log.main([str(log)]) == 0 and "no EXL3_MOE_CPU_PROF" in capsys.readouterr().out
    assert prof_log.main([str(tmp_path / "gone.log")]) == 1
    assert "gone.log" in capsys.readouterr().err
