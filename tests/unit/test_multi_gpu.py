"""frank.engine.multi_gpu: llama.cpp's layer-to-GPU arithmetic, the CPU-expert layers balanced over two
GPUs (against --n-cpu-moe's first N, which all sit on GPU 0), the --override-tensor pattern matched against
llama.cpp's tensor names, the command-line rewrite, and the GPUs a vLLM command line spans."""

from __future__ import annotations

import re

import pytest

from frank.engine import multi_gpu as mg


def test_layer_devices_follow_llama_cpps_split_points():
    # 12 layers + the output layer over 1,1: layer i is on GPU 0 while i/13 < 0.5, so GPU 0 holds 7 layers
    assert mg.layer_devices(12, [1, 1], 99) == [0] * 7 + [1] * 5
    # the tiny model's 2 layers: both on GPU 0 (1/3 < 0.5); only the output layer goes to GPU 1
    assert mg.layer_devices(2, [1, 1], 99) == [0, 0]
    assert mg.layer_devices(12, [3, 1], 99) == [0] * 10 + [1] * 2  # i/13 < 0.75
    # 10 GPU layers: the first 3 of 13 stay on the CPU, the other 10 split 5 and 5 (positions 0..4 < 0.5)
    assert mg.layer_devices(12, [1, 1], 10) == [None] * 3 + [0] * 5 + [1] * 4
    # an exact boundary: 13 layers + output, 7/14 == 0.5 is not below the split point, so layer 7 is GPU 1's
    assert mg.layer_devices(13, [1, 1], 99) == [0] * 7 + [1] * 6


def test_n_cpu_moe_puts_every_cpu_expert_layer_on_gpu_0_and_the_balance_takes_them_from_both():
    devices = mg.layer_devices(12, [1, 1], 99)
    assert {devices[i] for i in range(4)} == {0}  # --n-cpu-moe 4: layers 0-3, all on GPU 0
    chosen = mg.balanced_cpu_expert_layers(12, 4, [1, 1], 99)
    assert chosen == [0, 1, 7, 8]
    assert [devices[i] for i in chosen].count(0) == [devices[i] for i in chosen].count(1) == 2


@pytest.mark.parametrize(
    ("layers", "n_cpu", "split", "ngl", "expected"),
    [
        (12, 0, [1, 1], 99, []),
        (12, 1, [1, 1], 99, [0]),  # GPU 0 holds more layers: the larger remainder
        (12, 3, [1, 1], 99, [0, 1, 7]),
        (12, 12, [1, 1], 99, list(range(12))),
        (12, 20, [1, 1], 99, list(range(12))),  # more than the model has: all of them, as --n-cpu-moe does
        (12, 4, [3, 1], 99, [0, 1, 2, 10]),  # in proportion to each GPU's share (10 and 2 layers)
        (12, 4, [1, 1], 10, [0, 1, 2, 3]),  # layers 0-2 are wholly on the CPU already: they count first
        (12, 6, [1, 1], 10, [0, 1, 2, 3, 4, 8]),
        (6, 2, [1, 1], 99, [0, 4]),  # tiny-frank-moe: 0-3 on GPU 0, 4-5 on GPU 1
    ],
)
def test_balanced_cpu_expert_layers(layers, n_cpu, split, ngl, expected):
    chosen = mg.balanced_cpu_expert_layers(layers, n_cpu, split, ngl)
    assert chosen == expected
    assert len(chosen) == min(n_cpu, layers)


def test_the_override_pattern_matches_only_the_chosen_layers_routed_experts():
    value = mg.cpu_expert_override([8, 0, 7, 1])
    assert value == r"blk\.(0|1|7|8)\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU"
    pattern = re.compile(value.rsplit("=", 1)[0])  # llama.cpp matches with std::regex_search
    for name in ("blk.0.ffn_up_exps.weight", "blk.7.ffn_gate_exps.weight", "blk.8.ffn_down_exps.weight"):
        assert pattern.search(name), name
    for name in (
        "blk.17.ffn_up_exps.weight",  # another layer whose number ends in 7
        "blk.10.ffn_up_exps.weight",
        "blk.2.ffn_up_exps.weight",
        "blk.1.ffn_up_shexp.weight",  # the shared expert stays on the GPU
        "blk.1.ffn_gate_inp.weight",  # the router too
        "blk.1.attn_q.weight",
    ):
        assert not pattern.search(name), name
    with pytest.raises(mg.SplitError):
        mg.cpu_expert_override([])


BASE = ["llama-server", "--model", "m.gguf", "--n-gpu-layers", "99", "--n-cpu-moe", "4", "--parallel", "1"]


def test_balance_cpu_moe_rewrites_only_a_layer_split_over_several_gpus():
    two = BASE + ["--split-mode", "layer", "--tensor-split", "1,1"]
    out = mg.balance_cpu_moe(two, 12)
    assert "--n-cpu-moe" not in out and out[:5] == BASE[:5] and out[5:11] == two[7:]
    assert out[-2:] == ["--override-tensor", r"blk\.(0|1|7|8)\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU"]
    # the = spellings and short names are read too; the default split mode is layer
    short = ["llama-server", "-ngl=all", "-ncmoe=4", "-ts", "1/1"]
    assert mg.balance_cpu_moe(short, 12) == ["llama-server", "-ngl=all", "-ts", "1/1", *out[-2:]]
    for untouched in (
        BASE,  # no tensor split: one GPU
        BASE + ["--split-mode", "none", "--tensor-split", "1,1"],
        BASE + ["--split-mode", "row", "--tensor-split", "1,1"],  # every layer spans both GPUs
        BASE + ["--tensor-split", "1,0"],  # one GPU given a share
        [a if a != "4" else "0" for a in BASE] + ["--tensor-split", "1,1"],
    ):
        assert mg.balance_cpu_moe(untouched, 12) == untouched
        assert not mg.needs_layer_count(untouched)


def test_balance_cpu_moe_refuses_what_it_cannot_know():
    auto = [a for a in BASE if a not in ("--n-gpu-layers", "99")] + ["--tensor-split", "1,1"]
    with pytest.raises(mg.SplitError, match="--n-gpu-layers"):
        mg.balance_cpu_moe(auto, 12)
    with pytest.raises(mg.SplitError, match="--tensor-split"):
        mg.llamacpp_gpu_shares(BASE + ["--tensor-split", "half,half"])
    with pytest.raises(mg.SplitError, match="not all zero"):
        mg.layer_devices(12, [0, 0], 99)


def test_vllm_gpu_count_multiplies_the_parallel_sizes():
    assert mg.vllm_gpu_count(["vllm", "--tensor-parallel-size", "2"]) == 2
    assert mg.vllm_gpu_count(["vllm", "--tensor-parallel-size", "1"]) == 1
    assert mg.vllm_gpu_count(["vllm", "-tp", "2", "--pipeline-parallel-size=2"]) == 4
    assert mg.vllm_gpu_count(["vllm", "--tensor_parallel_size", "1", "--data-parallel-size", "2"]) == 2
    assert mg.vllm_gpu_count(["vllm", "--model", "x"]) == 1
