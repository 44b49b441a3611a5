"""The CPU panel's CPU-expert pool line and the metrics panel's live wait, on plain values."""

from __future__ import annotations

from frank.console.widgets.cpu_panel import CpuView, _pool_text


def test_the_pool_line_reads_the_share_each_thread_and_the_gpu_beside_it():
    view = CpuView(per_core=(10.0, 90.0), pool=(("main", 49.4), ("worker", 38.6)), pool_busy=44.0, gpu_util=35.0,
                   pcie=(1.2e9, 1.0e8))  # fmt: skip
    text = _pool_text(view, 100)  # every number named: no legend needed
    assert text == "44% busy on 2 threads (main 49%, worker 39%) · gpu 35% busy, pcie 1.1 GiB/s out 95.4 MiB/s in", text
    narrow = _pool_text(view, 55)  # the per-thread part gives way first, thread by thread
    assert narrow == "44% busy on 2 threads (main 49%) · gpu 35% busy", narrow
    narrowest = _pool_text(view, 30)
    assert narrowest == "44% busy on 2 threads · gpu 35% busy", narrowest
