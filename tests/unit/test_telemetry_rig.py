"""frank.telemetry.rig: the rig's fixed facts and the conditions of a stretch, through the real GPU sampler over
a recorded NVML (two H200s) and, for real, the no-GPU path of this machine; the CPU's steal time and the
other processes' CPU from /proc/stat; the recorder an experiment cell runs beside its engine."""

from __future__ import annotations

import dataclasses
import os
import time

import pytest

from frank.telemetry import cpu as cpu_mod
from frank.telemetry import gpu as gpu_mod
from frank.telemetry.cpu import CpuSample, CpuSampler
from frank.telemetry.rig import ConditionsTally, rig_facts
from frank.telemetry.rig_recorder import PERIOD_ENV, RigRecorder
from tests.recorded_nvml import readings, recorded_nvml


def cpu_sample(**kw: object) -> CpuSample:
    base = CpuSample((50.0, 50.0), 50.0, 1 << 30, 1 << 29, 1 << 29, None, "no engine process", 0.0)
    return dataclasses.replace(base, **kw)


def test_the_facts_of_a_gpu_machine_name_the_link_and_power_against_their_maximum() -> None:
    with recorded_nvml() as nvml:
        nvml.static[1] = {**nvml.static[1], "pcie_width": 8, "power_default_limit_mw": 800000}
        sampler = gpu_mod.GpuSampler()
        reading = sampler.sample((4242,))
    facts = rig_facts(reading, cpu_sample())
    assert facts.gpus is not None and facts.gpus_reason is None and len(facts.gpus) == 2
    g0, g1 = facts.gpus
    # the recorded NVML answers current and maximum link alike: the second card's x8 is both
    assert (g0.pcie_gen, g0.pcie_width, g0.pcie_gen_max, g0.pcie_width_max, g0.link_below_max) == (5, 16, 5, 16, False)
    assert (g0.power_limit_w, g0.power_default_limit_w, g0.power_below_default) == (700.0, 700.0, False)
    assert (g1.power_limit_w, g1.power_default_limit_w, g1.power_below_default) == (700.0, 800.0, True)
    assert (g0.sm_clock_max_mhz, g0.mem_clock_max_mhz) == (1980.0, 3201.0)
    js = facts.to_json()
    assert js["gpus"][1]["power_below_default"] is True and js["host"]["logical_cores"] == 2


def test_a_link_trained_below_its_maximum_is_named() -> None:
    facts = rig_facts(readings()[0], cpu_sample())
    assert facts.gpus is not None
    lowered = dataclasses.replace(facts.gpus[0], pcie_gen=4, pcie_width=16)
    assert lowered.link_below_max is True and dataclasses.replace(lowered, pcie_gen=None).link_below_max is None


def test_no_gpu_gives_null_gpus_with_the_reason() -> None:
    reading = gpu_mod.GpuReading((), "no GPU telemetry (NVML Shared Library Not Found)", 0.0)
    facts = rig_facts(reading, cpu_sample())
    assert facts.gpus is None and facts.gpus_reason == "no GPU telemetry (NVML Shared Library Not Found)"
    assert facts.to_json()["gpus"] is None


def test_telemetry_once_json_carries_the_rig(frank_cli) -> None:
    """The real sampler on this machine: a GPU machine lists each card's link and power limit; here (no GPU)
    `gpus` is null and the reason says why."""
    out = frank_cli.json("telemetry", "--once", "--period", "0.2", "--no-gpu")
    assert out["rig"]["gpus"] is None and out["rig"]["gpus_reason"] == "no GPU telemetry (disabled)"
    out = frank_cli.json("telemetry", "--once", "--period", "0.2")
    rig = out["rig"]
    assert set(rig) == {"gpus", "gpus_reason", "host"} and rig["host"]["logical_cores"] == os.cpu_count()
    if rig["gpus"] is None:
        assert rig["gpus_reason"].startswith("no GPU telemetry (") and rig["gpus_reason"] == out["gpu_error"]
    else:
        for g in rig["gpus"]:
            assert {"pcie_gen", "pcie_width", "pcie_gen_max", "pcie_width_max", "power_limit_w"} <= set(g)
            assert g["pcie_gen_max"] and g["power_limit_w"]
    assert out["cpu"]["steal_percent"] is not None and out["cpu"]["cpu_mhz_source"]


def test_conditions_fold_samples_into_spans_and_throttle_shares() -> None:
    steps = readings()
    tally = ConditionsTally()
    for i, reading in enumerate(steps):
        gpus = reading.gpus
        # every other sample of the first card held back by its power cap; the second's reasons unreadable
        first = dataclasses.replace(gpus[0], throttle_reasons=("sw_power_cap",) if i % 2 else ())
        gpus = (first, dataclasses.replace(gpus[1], throttle_reasons=None))
        tally.add(dataclasses.replace(reading, gpus=gpus), cpu_sample(steal_percent=float(i)), 1000.0 + i)
    c = tally.conditions()
    assert c.samples == len(steps) and c.seconds == len(steps) - 1
    assert c.gpus is not None and [g.index for g in c.gpus] == [0, 1]
    g0 = c.gpus[0]
    assert g0.throttle == {"sw_power_cap": pytest.approx((len(steps) // 2) / len(steps))}
    assert g0.throttle_read == len(steps) and c.gpus[1].throttle_read == 0  # the second card's unread
    temps = [s.gpus[0].temperature_c for s in steps]
    assert (g0.temperature_c.min, g0.temperature_c.max) == (min(temps), max(temps))
    assert c.steal_percent is not None and c.steal_percent.mean == pytest.approx((len(steps) - 1) / 2)
    assert c.others_percent is None and c.to_json()["gpus"][0]["power_limit_w"] == 700.0
    none = ConditionsTally()
    none.add(gpu_mod.GpuReading((), "no GPU telemetry (x)", 0.0), cpu_sample(), 1.0)
    assert none.conditions().gpus is None and none.conditions().gpus_reason == "no GPU telemetry (x)"


def test_steal_and_the_other_processes_cpu_from_proc_stat(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two cores over one second (100 ticks each): 30 ticks stolen, 150 busy; the engine used 0.5 s and this
    process 0.2 s, so the others used 0.8 s: 80% of a core."""
    ticks = iter([[(0, 0, 0), (0, 0, 0)], [(70, 100, 10), (80, 100, 20)]])
    own = iter([10.0, 10.2])
    monkeypatch.setattr(cpu_mod.procfs, "core_ticks", lambda: next(ticks))
    monkeypatch.setattr(cpu_mod.procfs, "self_cpu_s", lambda: next(own))
    monkeypatch.setattr(cpu_mod.procfs, "CLOCK_TICKS", 100)
    s = CpuSampler()
    s._engine_used = None
    monkeypatch.setattr(s, "_engine", lambda pid: (s.__dict__.update(_engine_used=0.5), (None, None))[1])
    x = s.sample(1234)
    assert x.steal_percent == pytest.approx(15.0)
    assert x.others_percent == pytest.approx(80.0, abs=1.0) and x.self_percent is not None
    assert x.cpu_mhz_source  # "cpufreq" | "cpuinfo", or why not


def test_the_recorder_samples_beside_a_process_until_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = RigRecorder(os.getpid(), period_s=0.05).start()
    deadline = time.monotonic() + 20
    while len(recorder.tally.walls) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    facts, conditions = recorder.stop()
    assert facts is not None and conditions is not None and conditions.samples >= 3
    assert conditions.engine_percent is not None and conditions.steal_percent is not None
    if facts.gpus is None:
        assert conditions.gpus is None and (facts.gpus_reason or "").startswith("no GPU telemetry")
    seen = len(recorder.tally.walls)
    time.sleep(0.2)
    assert len(recorder.tally.walls) == seen  # stopped: no sample after stop()
    short = RigRecorder(os.getpid(), period_s=30.0).start()  # a stretch shorter than a period
    deadline = time.monotonic() + 20
    while short._sampler.latest() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    _, brief = short.stop()
    assert brief is not None and brief.samples == 1  # the last sample, taken at stop()
    monkeypatch.setenv(PERIOD_ENV, "0")
    off = RigRecorder(os.getpid()).start()
    assert off.stop() == (None, None)
