"""The CPU panel's CPU-expert pool line and the metrics panel's live wait, on plain values."""

from __future__ import annotations

from frank.console.widgets.cpu_panel import CpuView, _pool_text


def test_the_pool_line_reads_the_share_each_thread_and_the_gpu_beside_it():
    view = CpuView(per_core=(10.0, 90.0), pool=(("main", 49.4), ("worker", 38.6)), pool_busy=44.0, gpu_util=35.0,
                   pcie=(1.2e9, 1.0e8))  # fmt: skip
    text = _pool_text(view, 70)
    assert text.startswith("44") and "of 2: m 49 w 39" in text and "gpu 35" in text and "pcie" in text
    narrow = _pool_text(view, 30)  # the per-thread part is what gives way
    assert "m 49" not in narrow and narrow.startswith("44% of 2:") and "gpu 35%" in narrow
