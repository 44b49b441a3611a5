"""The metrics panel's CPU-side decode row beside the verify step (frank.telemetry.cpu_decode's figures), on plain
values: exllamav3's compute, stall, GPU idle share and placement verdict, or "–" and why."""

from __future__ import annotations

import re

from frank.console.screens.dashboard import cpu_decode_view
from frank.console.widgets.metrics_panel import CpuDecodeView, _cpu_decode
from frank.telemetry.cpu_decode import CpuDecode
from tests.console.recorded import snapshot

WIDE_PANEL = 56  # the metrics panel's text width in the 120-column layout


def plain(lines: list[str]) -> list[str]:
    return [re.sub(r"\[/?\$?[a-z-]*\]", "", line) for line in lines]


def test_an_engine_without_the_figures_has_one_dash_line_saying_why():
    assert plain(_cpu_decode(CpuDecodeView(why="vLLM: no CPU-expert profile"))) == [
        "cpu pool            – vLLM: no CPU-expert profile"
    ]
    assert _cpu_decode(None) == []  # a snapshot made by hand: no row


def test_exllamav3s_figures_a_line_each_and_narrow_enough_for_the_wide_layout():
    view = CpuDecodeView(
        exl3=True,
        compute_step_s=90e-6,
        stall_step_s=0.24e-3,
        gpu_wait_share=0.06,
        pool_busy_share=0.142,
        pool_spin_s=4e-6,
        settled=False,
        settled_why="300/1024 steps since a swap",
        swaps_window=4,
        window_s=10.0,
    )
    assert plain(_cpu_decode(view)) == [
        "cpu compute   0.09 ms a step (at most)",
        "gpu stall     0.24 ms a step · GPU idle 6.0%",
        "cpu pool          14% busy · waits on GPU 4 µs a job",
        "placement    settling 300/1024 steps since a swap · 4 in 10 s",
    ]
    settled = CpuDecodeView(exl3=True, compute_step_s=1e-3, stall_step_s=2e-4, settled=True,
                            settled_why="1500 steps since a swap", swaps_window=0, window_s=10.0)  # fmt: skip
    lines = plain(_cpu_decode(settled))
    assert lines[1] == "gpu stall     0.20 ms a step · GPU idle –" and lines[3].endswith(
        "settled 1500 steps since a swap"
    )
    assert plain(_cpu_decode(CpuDecodeView(exl3=True, pool_busy_share=0.97, pool_spin_s=2.5e-3)))[2] == (
        "cpu pool          97% busy · waits on GPU 2.50 ms a job"
    )
    assert all(len(line) <= WIDE_PANEL for line in lines)


def test_exllamav3_before_its_lines_and_without_its_layer_count():
    waiting = CpuDecodeView(why="no EXL3_MOE_CPU_PROF line yet", stall_why="no EXL3_SPLIT_PROF line yet", exl3=True,
                            pool_why="no EXL3_MOE_HANDOFF_PROF line yet",
                            settled_why="no CPU split layer in the log yet")  # fmt: skip
    assert plain(_cpu_decode(waiting)) == [
        "cpu compute         – no EXL3_MOE_CPU_PROF line yet",
        "gpu stall           – no EXL3_SPLIT_PROF line yet",
        "cpu pool            – no EXL3_MOE_HANDOFF_PROF line yet",
        "placement           – no CPU split layer in the log yet",
    ]
    per_job = CpuDecodeView(exl3=True, compute_job_s=31.2e-6, stall_bracket_s=0.081e-3, settled_why="x")
    assert plain(_cpu_decode(per_job))[:2] == [
        "cpu compute   0.03 ms a job",
        "gpu stall     0.08 ms a collect (median)",
    ]


def test_the_dashboard_maps_the_snapshots_figures():
    snap = snapshot(3)
    assert cpu_decode_view(snap) == CpuDecodeView(why="vLLM: no CPU-expert profile", window_s=10.0)
    dec = CpuDecode(
        why=None,
        kind="exl3",
        compute_us_per_job=30.0,
        compute_step_s=9e-5,
        stall_median_ms=0.08,
        stall_step_s=2.4e-4,
        gpu_wait_share=0.06,
        pool_busy_share=0.5,
        pool_spin_ms=0.02,
        settled=True,
        settled_why="s",
        swaps_window=0,
    )
    view = cpu_decode_view(snap.__class__(**{**snap.__dict__, "cpu_decode": dec}))
    assert view is not None and (view.pool_busy_share, view.pool_spin_s) == (0.5, 2e-5)
    assert view is not None and view.exl3 and view.compute_job_s == 30e-6 and view.stall_bracket_s == 0.08e-3
    assert (view.compute_step_s, view.stall_step_s, view.gpu_wait_share, view.settled) == (9e-5, 2.4e-4, 0.06, True)
    assert cpu_decode_view(snap.__class__(**{**snap.__dict__, "cpu_decode": None})) is None
