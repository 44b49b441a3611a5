"""Two GPUs through frank's real GPU sampler and `frank telemetry --once --json`, read from a recorded NVML
(tests/recorded_nvml.py: two H200s SHAPED after the one H200 the GPU machine recorded; the two-GPU machine
has not been lent, so this is a recording of real-shaped values, not a measurement of two GPUs)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tests.recorded_nvml import MIB, RecordedNvml, readings, recorded_nvml


def recorded_rate(nvml: RecordedNvml, step: int, device: int, key: str) -> float:
    """The rate the recording's raw 32-bit counters give between two steps, unwrapped here independently."""
    before, after = (nvml.steps[s]["devices"][device][key] for s in (step - 1, step))
    return ((after - before) % (1 << 32)) / (nvml.steps[step]["t"] - nvml.steps[step - 1]["t"])


def test_the_sampler_reads_every_device_and_its_own_pcie_counters():
    nvml = RecordedNvml()
    got = readings()
    assert len(got) == len(nvml.steps) and all(r.error is None and len(r.gpus) == 2 for r in got)
    assert [g.index for g in got[0].gpus] == [0, 1]
    assert all(g.pcie_tx_bps is None and g.pcie_rx_bps is None for g in got[0].gpus)  # no rate from one read
    for step in range(1, len(got)):
        for d, g in enumerate(got[step].gpus):
            assert g.pcie_tx_bps == recorded_rate(nvml, step, d, "pcie_tx")
            assert g.pcie_rx_bps == recorded_rate(nvml, step, d, "pcie_rx")
            assert g.util_gpu == nvml.steps[step]["devices"][d]["util"][0]
            assert g.engine_memory == round(nvml.steps[step]["devices"][d]["procs"][0][1] * MIB)
            assert not g.errors
            # a 1 s gap in which an H200's gen5 x16 link could move 4 GiB, with over 512 MiB moved: the sampler
            # says the rate may hide a wrap (between samples its thread polls the counters more often then)
            assert g.pcie_may_alias == (max(g.pcie_tx_bps, g.pcie_rx_bps) >= 512 * MIB)
    # GPU 1's transmit counter wraps inside the recording: its rate stays the recorded one, not negative
    tx1 = [step["devices"][1]["pcie_tx"] for step in nvml.steps]
    wraps = [s for s in range(1, len(tx1)) if tx1[s] < tx1[s - 1]]
    assert wraps and all(got[s].gpus[1].pcie_tx_bps > 100 * MIB for s in wraps)
    assert got[1].gpus[0].pcie_may_alias  # the replay's 1,265 MiB/s prompt upload
    # each device keeps its own counters: the two GPUs' rates differ where the recording's do
    assert got[4].gpus[0].pcie_tx_bps == 150 * MIB and got[4].gpus[1].pcie_tx_bps == 139 * MIB


def test_telemetry_once_json_lists_both_gpus_with_pcie_figures(fresh_frank_home, monkeypatch, capsys):
    from frank.console import cli
    from frank.console.cli import telemetry_cmd

    with recorded_nvml() as nvml:
        nvml.step = 4  # into the recorded load; the command's one-period wait moves the recording on a step
        monkeypatch.setattr(telemetry_cmd, "time", SimpleNamespace(sleep=nvml.sleep))
        assert cli.main(["telemetry", "--once", "--json", "--period", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gpu_error"] is None and out["engine"]["state"] == "stopped"
    gpus = out["gpus"]
    assert [(g["index"], g["name"]) for g in gpus] == [(0, "NVIDIA H200"), (1, "NVIDIA H200")]
    step = nvml.steps[5]["devices"]
    for g, rec in zip(gpus, step, strict=True):
        assert (g["pcie_gen"], g["pcie_width"]) == (5, 16)
        assert g["memory_total"] == 143771 * MIB and g["memory_used"] == round(rec["mem_used_mib"] * MIB)
        assert g["power_w"] == rec["power_mw"] / 1000 and g["power_limit_w"] == 700.0
        assert g["util_gpu"] == rec["util"][0] and g["temperature_c"] == rec["temp_c"]
        assert g["pcie_tx_bps"] == pytest.approx(recorded_rate(nvml, 5, g["index"], "pcie_tx"))
        assert g["pcie_rx_bps"] == pytest.approx(recorded_rate(nvml, 5, g["index"], "pcie_rx"))
        # no engine runs here: the recorded engine process is listed, but not counted as frank's engine
        assert g["processes"] == [{"pid": 4242, "used_memory": round(rec["procs"][0][1] * MIB), "engine": False}]
        assert g["engine_memory"] is None
    assert gpus[0]["pcie_tx_bps"] == 152 * MIB and gpus[1]["pcie_rx_bps"] == 25 * MIB
