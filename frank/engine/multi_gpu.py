"""What an engine launch over more than one GPU needs, written once; the engine kinds call it.

- NVLink multicast stays off in every engine's environment (`MULTICAST_OFF_ENV`): on the two-GPU H200 machine
  a program that uses it can put the host's GPUs, which others share, out of service for a day or more, and
  the machine's notes ask that the variables stay set also where a program starts with an environment of
  its own, as an engine under frank's supervisor does. Every launch gets them, whatever its GPU count
  (a one-GPU vLLM can still start NCCL through pipeline or data parallelism), set last; a profile or knob
  that sets one of them otherwise is refused (frank.engine.profiles).
- vLLM over several GPUs (`vllm_gpu_count`): its symmetric-memory all-reduce off (`VLLM_MULTI_GPU_ENV`).
  It rendezvous through PyTorch's symmetric memory, whose multicast is off there, and uses multimem
  all-reduces on four or more Hopper GPUs, which cannot run there; NCCL and vLLM's custom all-reduce (CUDA
  IPC) do the all-reduce instead.
- llama.cpp's layer split (`-sm layer --tensor-split A,B`): `layer_devices` says which GPU each layer sits
  on, with llama.cpp's own arithmetic (src/llama-model.cpp: the output layer counts as one more layer, the
  split points are float32 fractions). `--n-cpu-moe N` keeps the routed experts of the FIRST N layers on
  the CPU, and under a layer split those all sit on GPU 0: the CPU frees GPU 0's memory only, and GPU 0's
  half of every step waits on the CPU while GPU 1's does not. `balanced_cpu_expert_layers` takes the same
  count from every GPU's share of the layers instead (the first ones of each share, in proportion to the
  share's size), and `balance_cpu_moe` turns `--n-cpu-moe N` into `--override-tensor` patterns naming those
  layers (llama.cpp's own expert-tensor regex, `=CPU`). docs/measures.md has the why beside the CPU-expert
  wait.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

MULTICAST_OFF_ENV: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
VLLM_MULTI_GPU_ENV: dict[str, str] = {"VLLM_ALLREDUCE_USE_SYMM_MEM": "0"}

# llama.cpp's own pattern for a layer's routed-expert tensors (common/common.h LLM_FFN_EXPS_REGEX), which
# --n-cpu-moe uses as `blk\.N` + this; a shared expert (`ffn_*_shexp`) does not match it.
LLAMACPP_EXPERTS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
_SPLIT_MODE = ("-sm", "--split-mode")
_TENSOR_SPLIT = ("-ts", "--tensor-split")
_GPU_LAYERS = ("-ngl", "--gpu-layers", "--n-gpu-layers")
_CPU_MOE = ("-ncmoe", "--n-cpu-moe")


class SplitError(ValueError):
    """A command line whose GPU split cannot be worked out; the message says which flag and why."""


def _flag_value(argv: Sequence[str], names: Sequence[str]) -> str | None:
    """The last value given for any spelling of a flag (`--flag V` or `--flag=V`), or None."""
    value = None
    for i, arg in enumerate(argv):
        head, eq, tail = arg.partition("=")
        if head in names:
            value = tail if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return value


def vllm_gpu_count(argv: Sequence[str]) -> int:
    """GPUs a vLLM command line spans: tensor parallel x pipeline parallel x data parallel."""
    count = 1
    for names in (
        ("-tp", "--tensor-parallel-size"),
        ("-pp", "--pipeline-parallel-size"),
        ("-dp", "--data-parallel-size"),
    ):
        value = _flag_value(argv, (*names, *(n.replace("-", "_") for n in names if n.startswith("--"))))
        if value is not None and value.isdigit():
            count *= max(1, int(value))
    return count


def _f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def layer_devices(n_layers: int, tensor_split: Sequence[float], n_gpu_layers: int) -> list[int | None]:
    """The GPU (index into `tensor_split`) of each of a model's `n_layers` repeating layers under llama.cpp's
    layer split, None for a layer left on the CPU (`n_gpu_layers` short of all). As llama.cpp computes it:
    the output layer is layer n_layers, the last `n_gpu_layers` of the n_layers + 1 go to the GPUs, and a
    layer's GPU is the first whose cumulative float32 share exceeds its position among them."""
    if n_layers <= 0:
        raise SplitError(f"a model of {n_layers} layers")
    if not tensor_split or any(s < 0 for s in tensor_split) or sum(tensor_split) <= 0:
        raise SplitError(f"--tensor-split {list(tensor_split)}: expected non-negative shares, not all zero")
    points, total = [], 0.0
    for share in tensor_split:
        total = _f32(total + _f32(share))
        points.append(total)
    points = [_f32(p / total) for p in points]
    start = max(n_layers + 1 - n_gpu_layers, 0)
    active = min(n_gpu_layers, n_layers + 1)
    out: list[int | None] = []
    for layer in range(n_layers):
        if layer < start or layer - start >= active:
            out.append(None)
            continue
        where = _f32((layer - start) / active)
        out.append(next(i for i, p in enumerate(points) if p > where))
    return out


def balanced_cpu_expert_layers(
    n_layers: int, n_cpu: int, tensor_split: Sequence[float], n_gpu_layers: int | None = None
) -> list[int]:
    """`n_cpu` layers whose routed experts the CPU computes, taken from every GPU's share of the layers in
    proportion to its size (largest remainder; a tie goes to the earlier GPU), the first layers of each
    share; layers already on the CPU (`n_gpu_layers` short of all) count first. Sorted."""
    devices = layer_devices(n_layers, tensor_split, n_layers + 1 if n_gpu_layers is None else n_gpu_layers)
    n_cpu = max(0, min(n_cpu, n_layers))
    on_cpu = [i for i, d in enumerate(devices) if d is None]
    chosen = on_cpu[:n_cpu]
    shares: dict[int, list[int]] = {}
    for i, d in enumerate(devices):
        if d is not None:
            shares.setdefault(d, []).append(i)
    left = n_cpu - len(chosen)
    if left <= 0:
        return sorted(chosen)
    on_gpus = sum(len(v) for v in shares.values())
    quota = {d: left * len(v) // on_gpus for d, v in shares.items()}
    by_remainder = sorted(shares, key=lambda d: (-(left * len(shares[d]) % on_gpus), d))
    for d in by_remainder[: left - sum(quota.values())]:
        quota[d] += 1
    for d, layers in sorted(shares.items()):
        chosen += layers[: quota[d]]
    return sorted(chosen)


def cpu_expert_override(layers: Sequence[int]) -> str:
    """The `--override-tensor` value that keeps these layers' routed experts on the CPU."""
    if not layers:
        raise SplitError("no layers to keep on the CPU")
    names = "|".join(str(i) for i in sorted(set(layers)))
    return rf"blk\.({names}){LLAMACPP_EXPERTS_REGEX}=CPU"


def llamacpp_gpu_shares(argv: Sequence[str]) -> list[float] | None:
    """The tensor split's shares when the command line splits layers over more than one GPU, else None."""
    mode = _flag_value(argv, _SPLIT_MODE) or "layer"  # llama.cpp's default split mode
    split = _flag_value(argv, _TENSOR_SPLIT)
    if mode != "layer" or not split:
        return None
    try:
        shares = [float(s) for s in split.replace("/", ",").split(",") if s]
    except ValueError:
        raise SplitError(f"--tensor-split {split}: expected numbers like 1,1") from None
    return shares if sum(1 for s in shares if s > 0) > 1 else None


def _gpu_layers(argv: Sequence[str], n_layers: int) -> int:
    value = _flag_value(argv, _GPU_LAYERS)
    if value == "all":
        return n_layers + 1
    if value is None or not value.lstrip("-").isdigit() or int(value) < 0:
        raise SplitError(
            f"--n-gpu-layers {value or '(unset: auto)'}: the CPU-expert layers are balanced over the GPUs only "
            "when the layers on the GPUs are known (a number, or all)"
        )
    return int(value)


def needs_layer_count(argv: Sequence[str]) -> bool:
    """Whether `balance_cpu_moe` would rewrite this command line (so the model's layer count is needed)."""
    n_cpu = _flag_value(argv, _CPU_MOE)
    return bool(n_cpu and n_cpu.isdigit() and int(n_cpu) > 0 and llamacpp_gpu_shares(argv))


def balance_cpu_moe(argv: Sequence[str], n_layers: int) -> list[str]:
    """argv with `--n-cpu-moe N` replaced by `--override-tensor` patterns for N layers balanced over the GPUs
    of a layer split (`balanced_cpu_expert_layers`); argv unchanged on one GPU or without --n-cpu-moe."""
    out = list(argv)
    if not needs_layer_count(out):
        return out
    shares = llamacpp_gpu_shares(out) or []
    layers = balanced_cpu_expert_layers(
        n_layers, int(_flag_value(out, _CPU_MOE) or 0), shares, _gpu_layers(out, n_layers)
    )
    for i in range(len(out) - 1, -1, -1):
        head, eq, _ = out[i].partition("=")
        if head in _CPU_MOE:
            del out[i : i + (1 if eq else 2)]
    return out + ["--override-tensor", cpu_expert_override(layers)]
