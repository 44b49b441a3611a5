"""The CPU-side decode figures, live (frank.telemetry.cpu_decode): exllamav3's profile lines followed in a growing
engine log, in the wheel's exact formats (each maker below is exllamav3 1.6.5's own print, its file and line
cited and checked against the wheel when it is here), lines arriving in pieces, a log rotated or truncated,
hostile lines that must neither crash nor move a figure; the sampler and the Prometheus export on top (the
dashboard's row: tests/console/test_cpu_decode_row.py)."""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from frank.console.cli.telemetry_cmd import _cpu_decode_line
from frank.engine.exl3 import prof_log
from frank.telemetry import cpu_decode as cd
from frank.telemetry import sampler
from frank.telemetry.export import SnapshotCollector
from frank.telemetry.sampler import Sampler, Target, snapshot_to_json

WHEEL = Path(__file__).resolve().parents[2] / ".device/exl3/exllamav3-1.6.5-py3-none-any.whl"

# exllamav3_ext/cpu/moe_mul1.cpp:3987-3988, the printf's format (its two literals joined; %ld is %d in Python)
POOL_FMT = (
    " -- moe_cpu prof (%ld jobs, us/job): prep_gu %.1f | gemv_gu %.1f (%.1f GB/s)"
    " | act+prep_d %.1f | gemv_d %.1f (%.1f GB/s) | tf_d/finish %.1f | accum %.1f\n"
)


def pool_line(jobs: int, phases: tuple[float, ...] = (0.0, 20.0, 0.0, 10.0, 0.0, 0.0)) -> str:
    prep_gu, gemv_gu, act, gemv_d, tf, accum = phases
    return (POOL_FMT.replace("%ld", "%d") % (jobs, prep_gu, gemv_gu, 12.5, act, gemv_d, 11.0, tf, accum)).rstrip("\n")


# exllamav3_ext/cpu/moe_handoff.cu:544-546, the printf's format (its three literals joined)
HANDOFF_FMT = (
    " -- handoff prof (%ld jobs, ms/job avg|max): gap %.3f|%.3f "
    "spin %.3f|%.3f compute %.3f|%.3f | empty %ld/64, "
    "cpu-assign/row %.2f\n"
)


def handoff_line(jobs: int, gap=(0.21, 1.9), spin=(0.004, 0.05), compute=(0.035, 0.09), empty=3, assign=1.25) -> str:
    values = (jobs, *gap, *spin, *compute, empty, assign)
    return (HANDOFF_FMT.replace("%ld", "%d") % values).rstrip("\n")


def split_line(k: str, vals: list[float], worst: dict[int, tuple[float, int]]) -> str:
    """exllamav3/modules/block_sparse_mlp_cpu.py:36-39 (vals sorted, as it sorts them)."""
    return (
        f" -- split prof [{k}] ({len(vals)} brackets, stream ms): "
        f"med {vals[len(vals) // 2]:.3f} p90 {vals[int(len(vals) * 0.9)]:.3f} "
        f"max {vals[-1]:.3f} | worst layers " + " ".join(f"L{l}:{s / n:.3f}" for l, (s, n) in worst.items())
    )


def layer_line(mode: str, key: str, first: int, num_experts: int, spares: int = 0, seeded: bool = False) -> str:
    """block_sparse_mlp_cpu.py:929-932, a split layer's load line."""
    return (
        f" -- CPU split experts (worker, {mode}): {key} "
        f"[{first}..{num_experts}) of {num_experts}"
        + (f", {spares} spare slots" if spares else "")
        + (", placement from saved profile" if seeded else "")
    )


def sweep_line(total: int) -> str:
    """block_sparse_mlp_cpu.py:150 (EXL3_MOE_CPU_SWAP_DEBUG; printed only when total > 0)."""
    return f" -- expert swap sweep: {total} swaps"


def promote_line(step: int, p: int, d: int, pend: int = 0) -> str:
    """block_sparse_mlp_cpu.py:323-326 (EXL3_MOE_CPU_SWAP_DEBUG, every 128 steps)."""
    st = {"steps": 128, "routed": 640.0, "missed": 64.0, "ms": 0.05}
    return (
        f" -- promote-on-miss: step {step}, {p} promotions, {d} demotions, {pend} in flight; "
        f"last {st['steps']} steps: {st['routed'] / st['steps']:.1f} routed/step, "
        f"{st['missed'] / st['steps']:.1f} on the CPU ({100 * (1 - st['missed'] / max(st['routed'], 1)):.1f}% hit), "
        f"hook {1000 * st['ms'] / st['steps']:.2f} ms/step"
    )


WAIT = split_line("wait", sorted([0.05] * 1000 + [0.08] * 800 + [0.14] * 247 + [0.9]), {3: (0.24, 2)})
LAYERS = [layer_line("dynamic", f"model.layers.{i}.mlp", 43, 64) for i in (1, 2, 3)]


def test_the_makers_are_exllamav3s_own_prints_at_the_cited_lines():
    if not WHEEL.exists():
        pytest.skip(f"no exllamav3 wheel at {WHEEL} (make exl3-wheel)")
    with zipfile.ZipFile(WHEEL) as whl:
        cpp = whl.read("exllamav3/exllamav3_ext/cpu/moe_mul1.cpp").decode().splitlines()
        py = whl.read("exllamav3/modules/block_sparse_mlp_cpu.py").decode().splitlines()
    assert '" -- moe_cpu prof (%ld jobs, us/job): prep_gu %.1f | gemv_gu %.1f (%.1f GB/s)"' in cpp[3986]
    assert '" | act+prep_d %.1f | gemv_d %.1f (%.1f GB/s) | tf_d/finish %.1f | accum %.1f\\n",' in cpp[3987]
    with zipfile.ZipFile(WHEEL) as whl:
        cu = whl.read("exllamav3/exllamav3_ext/cpu/moe_handoff.cu").decode().splitlines()
    literals = "".join(cu[i].strip().removeprefix("printf(").split('"')[1] for i in (543, 544, 545))
    assert literals == HANDOFF_FMT.replace("\n", "\\n"), "moe_handoff.cu:544-546"
    assert "++hp_jobs % 64 == 0" in cu[541] and 'getenv("EXL3_MOE_HANDOFF_PROF") != nullptr' in cu[436]
    cited = {
        36: 'print(f" -- split prof [{k}] ({len(vals)} brackets, stream ms): "',
        37: 'f"med {vals[len(vals) // 2]:.3f} p90 {vals[int(len(vals) * 0.9)]:.3f} "',
        38: 'f"max {vals[-1]:.3f} | worst layers "',
        150: 'print(f" -- expert swap sweep: {total} swaps", flush = True)',
        323: 'print(f" -- promote-on-miss: step {modules[0]._split_step_count}, {p} promotions, {d} demotions, '
        '{pend} in flight; "',
        929: 'print(f" -- CPU split experts (worker, {mode}): {self.key} "',
        930: 'f"[{first}..{self.num_experts}) of {self.num_experts}"',
    }
    for line, text in cited.items():
        assert text in py[line - 1], f"block_sparse_mlp_cpu.py:{line}"
    assert 'mode = ("promote-on-miss" if spares else "dynamic") if self._split_dynamic else "static"' in py[927]


def test_each_line_is_read_and_a_line_that_is_no_number_is_refused_whole():
    pool = prof_log.parse_line("[exl3] " + pool_line(1024, (1.0, 22.0, 0.5, 11.0, 0.3, 0.2)))
    assert isinstance(pool, prof_log.PoolProf) and pool.jobs == 1024
    assert pool.compute_us_per_job == pytest.approx(35.0)
    assert prof_log.parse_line(WAIT) == prof_log.SplitProf("wait", 2048, 0.08, 0.14, 0.9)
    assert prof_log.parse_line(LAYERS[0]) == prof_log.SplitLayer("model.layers.1.mlp", "dynamic", 43, 64)
    assert prof_log.parse_line(layer_line("promote-on-miss", "m.l.4", 40, 64, 4, True)).placement == ("promote-on-miss")
    assert prof_log.parse_line(sweep_line(3)) == prof_log.SwapSweep(3)
    assert prof_log.parse_line(promote_line(256, 5, 4, 1)) == prof_log.PromoteProf(256, 5, 4, 1)
    handoff = prof_log.parse_line(handoff_line(128))
    assert handoff == prof_log.HandoffProf(128, 0.21, 1.9, 0.004, 0.05, 0.035, 0.09, 3, 1.25)
    assert handoff.busy_share == pytest.approx(0.035 / (0.21 + 0.004 + 0.035))
    # a phase's bandwidth is no figure frank reads: nan there (a phase that never ran) still reads
    assert prof_log.parse_line(pool_line(512).replace("12.5 GB/s", "-nan GB/s")) is not None
    hostile = [
        pool_line(512).replace("gemv_gu 20.0", "gemv_gu 2.0.0"),
        pool_line(512).replace("gemv_gu 20.0", "gemv_gu nan"),
        pool_line(512).replace("gemv_gu 20.0", "gemv_gu " + "9" * 400),  # inf as a float, were it read
        pool_line(512).replace("(512 jobs", "(0 jobs"),
        pool_line(512).replace("(512 jobs", "(" + "9" * 5000 + " jobs"),  # past int()'s digit limit
        pool_line(512).replace("gemv_gu 20.0", "gemv_gu -3.0"),
        WAIT.replace("med 0.080", "med 0.900"),  # a median above its p90 cannot be
        WAIT.replace("(2048 brackets", "(0 brackets"),
        layer_line("dynamic", "k", 70, 64),
        handoff_line(100),  # printed every 64 jobs: 100 cannot be
        handoff_line(128, gap=(2.0, 1.9)),  # a window's mean above its max cannot be
        handoff_line(128, empty=65),  # of 64 jobs
        handoff_line(128).replace("compute 0.035", "compute nan"),
        handoff_line(128).replace("cpu-assign/row 1.25", "cpu-assign/row -nan"),
        sweep_line(1).replace("1 swaps", "x swaps"),
        " -- moe_cpu prof (" * 20000,
        "-- " * 100000 + pool_line(512)[:40],
    ]
    for line in hostile:
        assert prof_log.looks_like(line)
        assert prof_log.parse_line(line) is None, line[:80]
    read = prof_log.parse("\n".join([*hostile, pool_line(512), handoff_line(64), handoff_line(128)]))
    assert read.pool[0].jobs == 512 and [h.jobs for h in read.handoff] == [64, 128]
    assert read.to_json()["handoff_last"]["jobs"] == 128


def grow(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


def test_lines_arriving_in_pieces_are_read_whole_once_their_newline_came(tmp_path):
    log, tail = tmp_path / "engine.log", cd.LogLines()
    assert tail.poll(log) == ([], True)  # not there yet
    line = pool_line(512)
    grow(log, "[frank] starting\n" + line[:30])
    assert tail.poll(log) == (["[frank] starting"], True)
    grow(log, line[30:61])  # mid-number
    assert tail.poll(log) == ([], False)
    grow(log, line[61:] + "\r\n" + sweep_line(2)[:9])
    assert tail.poll(log) == ([line], False)
    grow(log, sweep_line(2)[9:] + "\n")
    assert tail.poll(log) == ([sweep_line(2)], False)
    assert tail.from_start


def test_a_rotated_or_truncated_log_is_read_again_from_its_start(tmp_path):
    log, tail = tmp_path / "engine.log", cd.LogLines()
    grow(log, "old 1\nold 2\n")
    assert tail.poll(log) == (["old 1", "old 2"], True)
    log.rename(tmp_path / "engine.log.1")  # the controller's rotation at a start
    grow(log, "new 1\n")
    assert tail.poll(log) == (["new 1"], True)
    log.write_text("x\n")  # truncated (shorter than what was read)
    assert tail.poll(log) == (["x"], True)
    assert tail.poll(log) == ([], False)


def test_a_huge_line_is_dropped_as_it_streams_and_reads_are_bounded(tmp_path):
    log, tail = tmp_path / "engine.log", cd.LogLines(max_line=100, first_read=1000, max_read=500)
    grow(log, "a" * 60)
    assert tail.poll(log) == ([], True)
    grow(log, "a" * 60)  # past max_line with no newline yet: dropped, not held
    assert tail.poll(log) == ([], False) and tail.dropped == 1 and tail._partial == b""
    grow(log, "a" * 80 + "\nnext\n" + "b" * 150 + "\nlast \xff\n")
    assert tail.poll(log) == (["next", "last \xff"], False) and tail.dropped == 2
    grow(log, "c" * 2000 + "\nafter the burst\n")  # a burst past max_read: only its end is read
    assert tail.poll(log) == (["after the burst"], False) and tail.skipped_bytes > 0
    big, fresh = tmp_path / "big.log", cd.LogLines(first_read=1000)
    big.write_bytes(b"x\n" * 5000 + b"tail line\n")  # met late: its last bytes only
    lines, restarted = fresh.poll(big)
    assert restarted and not fresh.from_start and lines[-1] == "tail line" and len(lines) < 600
    (tmp_path / "bad.log").write_bytes(b"\xfe\xff \x00 -- moe_cpu prof (\n")
    assert cd.LogLines().poll(tmp_path / "bad.log")[0] == ["\ufffd\ufffd \x00 -- moe_cpu prof ("]


def watch(swap_debug: bool = True) -> cd.Exl3ProfWatch:
    env = {cd.SWAP_DEBUG_ENV: "1"} if swap_debug else {}
    return cd.Exl3ProfWatch(window_s=10.0, environ=lambda pid: env)


def test_the_pools_compute_the_gpus_stall_and_its_idle_share_a_step(tmp_path):
    log, w = tmp_path / "engine.log", watch()
    grow(log, "\n".join([*LAYERS, "[exl3_server] listening", pool_line(512, (0.0, 20.0, 0.0, 10.0, 0.0, 0.0))]))
    w.update(str(log), 4242, now=100.0, steps_total=0.0)
    fig = w.figures(0.0, None)
    assert fig.jobs is None and fig.why is not None  # the pool line's newline has not come: not read yet
    assert fig.why == "no EXL3_MOE_CPU_PROF line yet" and fig.split_layers == 3
    grow(log, "\n" + WAIT + "\n")
    w.update(str(log), 4242, now=101.0, steps_total=10.0)
    fig = w.figures(10.0, verify_step_s=0.004, cpu_wait_step_s=0.0021)
    assert fig.why is None and fig.stall_why is None
    assert (fig.kind, fig.split_layers, fig.jobs, fig.placement) == ("exl3", 3, 512, "dynamic")
    assert fig.compute_us_per_job == pytest.approx(30.0) and fig.compute_step_s == pytest.approx(90e-6)
    assert fig.stall_median_ms == pytest.approx(0.08) and fig.stall_step_s == pytest.approx(0.24e-3)
    assert fig.gpu_wait_share == pytest.approx(0.24e-3 / 0.004)
    assert fig.cpu_wait_step_s == 0.0021 and fig.lines == 5 and fig.refused == 0
    # hostile lines in the middle: counted, and no figure moves
    grow(log, pool_line(1024).replace("gemv_gu 20.0", "gemv_gu 1e9") + "\n" + "z" * 10000 + "\n")
    grow(log, WAIT.replace("med 0.080", "med 9.000") + "\n")
    w.update(str(log), 4242, now=102.0, steps_total=20.0)
    after = w.figures(10.0, verify_step_s=0.004, cpu_wait_step_s=0.0021)
    assert after == fig.__class__(**{**fig.__dict__, "refused": 2, "dropped": 1})


def test_the_pools_own_side_its_busy_share_its_wait_for_the_gpu_and_its_empty_jobs(tmp_path):
    log, w = tmp_path / "engine.log", watch()
    grow(log, "\n".join([*LAYERS, pool_line(512)]) + "\n")
    w.update(str(log), 4242, now=1.0, steps_total=0.0)
    fig = w.figures(0.0, None)
    assert fig.pool_busy_share is None and fig.pool_why == "no EXL3_MOE_HANDOFF_PROF line yet"
    grow(log, handoff_line(64, gap=(0.5, 3.0), spin=(0.25, 0.4), compute=(0.25, 0.3), empty=16) + "\n")
    w.update(str(log), 4242, now=2.0, steps_total=10.0)
    fig = w.figures(10.0, None)
    assert fig.pool_why is None and fig.pool_busy_share == pytest.approx(0.25)
    assert (fig.pool_gap_ms, fig.pool_spin_ms, fig.pool_job_ms, fig.pool_empty_share) == (0.5, 0.25, 0.25, 0.25)
    # the next window's line replaces it (each line covers its own 64 jobs); a hostile one moves nothing
    grow(log, handoff_line(128, gap=(0.0, 0.0), spin=(0.01, 0.02), compute=(0.09, 0.1), empty=0) + "\n")
    grow(log, handoff_line(192, gap=(9.0, 1.0)) + "\n")
    w.update(str(log), 4242, now=3.0, steps_total=20.0)
    fig = w.figures(20.0, None)
    assert fig.pool_busy_share == pytest.approx(0.9) and fig.pool_empty_share == 0.0 and fig.refused == 1


def test_the_placement_settles_after_1024_steps_without_a_swap(tmp_path):
    log, w = tmp_path / "engine.log", watch()
    grow(log, "\n".join(LAYERS) + "\n")
    w.update(str(log), 1, now=0.0, steps_total=0.0)
    assert w.figures(0.0, None).settled is False  # read from the engine's start: 0 steps since
    grow(log, sweep_line(4) + "\n")
    w.update(str(log), 1, now=5.0, steps_total=300.0)
    fig = w.figures(300.0, None)
    assert (fig.swaps_window, fig.swaps_total, fig.steps_since_swap, fig.settled) == (4, 4, 0.0, False)
    assert fig.settled_why == "0/1024 steps since a swap"
    w.update(str(log), 1, now=16.0, steps_total=1300.0)  # the swap left the 10 s window
    fig = w.figures(1300.0, None)
    assert (fig.swaps_window, fig.swaps_total, fig.settled) == (0, 4, False)
    w.update(str(log), 1, now=17.0, steps_total=1324.0)
    fig = w.figures(1324.0, None)
    assert fig.settled is True and fig.settled_why == "1024 steps since a swap"
    # the engine restarted: a new log, the old engine's figures gone
    log.rename(tmp_path / "engine.log.1")
    grow(log, layer_line("static", "model.layers.1.mlp", 43, 64) + "\n")
    w.update(str(log), 2, now=18.0, steps_total=0.0)
    fig = w.figures(0.0, None)
    assert (fig.placement, fig.settled, fig.swaps_total, fig.swaps_window) == ("static", True, 0, 0)
    assert (fig.why, fig.stall_why) == ("no EXL3_MOE_CPU_PROF line yet", "no EXL3_SPLIT_PROF line yet")


def test_swaps_read_when_a_log_is_met_late_are_past_not_in_the_window(tmp_path):
    log, w = tmp_path / "engine.log", cd.Exl3ProfWatch(environ=lambda pid: {cd.SWAP_DEBUG_ENV: "1"})
    grow(log, "\n".join([*LAYERS, sweep_line(5), sweep_line(1)]) + "\n")
    w.update(str(log), 1, now=50.0, steps_total=5000.0)
    fig = w.figures(5000.0, None)
    assert (fig.swaps_window, fig.swaps_total, fig.steps_since_swap, fig.settled) == (0, 6, 0.0, False)


def test_no_verdict_without_swap_logging_and_promote_on_miss_reads_its_own_totals(tmp_path):
    log = tmp_path / "engine.log"
    grow(log, "\n".join(LAYERS) + "\n")
    w = watch(swap_debug=False)
    w.update(str(log), 7, now=0.0, steps_total=5000.0)
    fig = w.figures(5000.0, None)
    assert (fig.settled, fig.swaps_window, fig.steps_since_swap) == (None, None, None)
    assert fig.settled_why == "EXL3_MOE_CPU_SWAP_DEBUG unset: swaps unlogged"
    other = tmp_path / "promote.log"
    grow(other, layer_line("promote-on-miss", "model.layers.1.mlp", 39, 64, 4) + "\n" + promote_line(128, 3, 3) + "\n")
    w = watch()
    w.update(str(other), 1, now=0.0, steps_total=None)
    assert w.figures(None, None).settled_why == "128/1024 steps logged"
    for step in range(256, 128 * 14, 128):
        grow(other, promote_line(step, 4 if step < 512 else 5, 5) + "\n")
        w.update(str(other), 1, now=step / 100, steps_total=None)
    fig = w.figures(None, None)
    assert fig.settled is True and fig.settled_why == "no promotion in 1024 steps"
    assert fig.swaps_total == 2 and fig.steps_since_swap == 1664.0 - 512  # since the line that showed it
    assert cd.placement_verdict("dynamic", True, None) == (None, "the engine's /metrics counts no steps")
    # a swap read while /metrics gave no step count is placed at the next count, never forgotten
    log, w = tmp_path / "late.log", watch()
    grow(log, LAYERS[0] + "\n")
    w.update(str(log), 1, now=0.0, steps_total=0.0)
    grow(log, sweep_line(2) + "\n")
    w.update(str(log), 1, now=1.0, steps_total=None)
    assert w.figures(None, None).settled is None
    w.update(str(log), 1, now=2.0, steps_total=2000.0)
    assert w.figures(2000.0, None).settled is False
    w.update(str(log), 1, now=3.0, steps_total=3024.0)
    assert w.figures(3024.0, None).settled is True
    # a log naming more split layers than any model has is not believed past MAX_LAYERS
    grow(log, "\n".join(layer_line("static", f"k{i}", 1, 2) for i in range(cd.MAX_LAYERS + 5)) + "\n")
    w.update(str(log), 1, now=4.0, steps_total=3024.0)
    fig = w.figures(3024.0, None)
    assert fig.split_layers == cd.MAX_LAYERS and fig.refused == 6  # LAYERS[0]'s key was already there
    assert cd.placement_verdict(None, True, 0.0)[0] is None


def test_the_sampler_puts_the_figures_in_its_snapshot_the_json_and_the_prometheus_export(tmp_path):
    log = tmp_path / "engine.log"
    grow(log, "\n".join([*LAYERS, pool_line(512), WAIT, handoff_line(64)]) + "\n")
    targets = {"kind": "exl3"}

    def target() -> Target:
        return Target(url=None, pid=None, kind=targets["kind"], log_path=str(log))

    sampler = Sampler(target, period_s=1.0, gpu=False)
    try:
        snap = sampler.sample_once()
        dec = snap.cpu_decode
        assert dec is not None and dec.kind == "exl3" and dec.jobs == 512 and dec.split_layers == 3
        assert dec.settled is None and dec.settled_why.endswith("swaps unlogged")  # no engine pid to read
        payload = snapshot_to_json(snap)
        assert payload["cpu_decode"]["compute_step_s"] == pytest.approx(90e-6)
        assert _cpu_decode_line(payload["cpu_decode"]) == (
            "  exllamav3 CPU pool: compute 9e-05 s a step; GPU stall 0.00024 s a step; pool busy 14% (waits on "
            "the GPU 4e-06 s a job); placement no verdict (EXL3_MOE_CPU_SWAP_DEBUG unset: swaps unlogged)"
        )
        registry = CollectorRegistry(auto_describe=False)
        registry.register(SnapshotCollector(lambda: snap))
        text = generate_latest(registry).decode()
        assert re.search(r"^frank_exl3_pool_compute_step_seconds 9(\.0+)?e-05$", text, re.M)
        assert 'frank_exl3_gpu_stall_bracket_seconds{quantile="0.5"} 8e-05' in text
        assert "frank_exl3_split_layers 3.0" in text and "frank_exl3_prof_lines_refused 0.0" in text
        assert "frank_exl3_placement_settled" not in text  # no verdict: no series
        assert re.search(r"^frank_exl3_pool_busy_ratio 0\.14", text, re.M)
        assert re.search(r"^frank_exl3_pool_spin_job_seconds 4(\.0+)?e-06$", text, re.M)
        assert "frank_exl3_pool_empty_ratio 0.046875" in text
        targets["kind"] = "vllm"
        snap = sampler.sample_once()
        assert snap.cpu_decode is not None and snap.cpu_decode.why == "vLLM: no CPU-expert profile"
        registry = CollectorRegistry(auto_describe=False)
        registry.register(SnapshotCollector(lambda: snap))
        assert "frank_exl3_" not in generate_latest(registry).decode()
        assert _cpu_decode_line(snapshot_to_json(snap)["cpu_decode"]) is None
    finally:
        sampler.stop()


def test_the_bounded_reader_audit_names_this_reader():
    from tests.unit.test_bounded_reader import EXCEPTIONS

    assert "engine's own log" in EXCEPTIONS["frank/telemetry/cpu_decode.py"]
    assert os.path.exists(Path(__file__).resolve().parents[2] / "frank/telemetry/cpu_decode.py")


def test_the_cpu_expert_wait_a_step_is_the_windows_mean_busy_share_over_its_steps():
    from types import SimpleNamespace as NS

    from frank.engine import measures

    rates = NS(valid=True, window_s=10.0, decode_steps=400.0)

    def snap(at: float, busy: float | None) -> NS:
        pool = None if busy is None else NS(workers_busy_pct=busy)
        return NS(taken_at=at, cpu=NS(engine=NS(expert_pool=pool)), engine=NS(rates=rates))

    history = [snap(0.0, 90.0), snap(5.0, 20.0), snap(8.0, None), snap(12.0, 40.0)]  # the first is out of the window
    assert sampler.window_cpu_expert_wait(history[-1], history) == pytest.approx(
        measures.window_cpu_expert_wait_s(30.0, 10.0, 400.0)
    )
    assert sampler.window_cpu_expert_wait(history[-1]) == pytest.approx(0.40 * 10.0 / 400.0)  # this snapshot's alone
    assert sampler.window_cpu_expert_wait(snap(1.0, None)) is None and sampler.window_cpu_expert_wait(None) is None
