"""The seed's model shape in miniature: a random DeepSeek-V4-Flash-shaped MoE (hash-MoE and routed MoE layers,
a shared expert, compressed attention, hyper-connections) with a DSpark draft, built deterministically for
llama.cpp, with the transformers checkpoint of the same weights kept as the fidelity reference.

    <models dir>/tiny-frank-moe/
        tiny-frank-moe.gguf          llama.cpp's model (architecture deepseek4, routed experts in MXFP4)
        tiny-frank-moe-dspark.gguf   its DSpark draft (`--spec-type draft-dspark`, architecture dflash)
        model.safetensors, config.json, generation_config.json, tokenizer*.json   the transformers reference
        manifest.json

How: the weights are drawn once from a seeded generator, named as transformers' DeepseekV4ForCausalLM names
them (its shapes come from a model built on the meta device), and written twice: as transformers' checkpoint
(float32) and in DeepSeek's own checkpoint layout (`layers.0.ffn.gate.tid2eid`, `layers.3.attn.wq_a.weight`,
routed experts packed FP4 with one E8M0 scale per 32 values, a DSpark stage under `mtp.0.`), which is what
llama.cpp's converter reads (its conversion/deepseek.py, DeepseekV4Model and DeepseekV4DSparkModel). The
routed experts are drawn as FP4 codes and scales, so the float32 reference holds exactly the values the
GGUF's MXFP4 blocks hold. transformers' own conversion mapping (DeepSeek -> transformers names) checks the
renaming on every build. The tokenizer and chat template are the tiny model's (tiny_model): copied from a
current tiny-frank build in the same models dir, else trained here (the same bytes either way).

Three sizes from the same code (MODELS): tiny-frank-moe (5M parameters, this machine's tests), frank-moe-gpu
(2.6 GB of MXFP4 experts, built on a GPU machine; no transformers reference is written for it) and
frank-moe-exl3 (about 1.2B parameters, its DeepSeek-layout checkpoint kept in `deepseek/` for exllamav3's
converter on the GPU machine).
Runs in the engine venv (torch, transformers, tokenizers) with llama.cpp's source unpacked by
scripts/pack_llamacpp_source.sh (FRANK_LLAMACPP_SRC overrides where).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frank.engine.models import llamacpp_convert, tiny_model

SEED = 4321
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
SCALE_EXPONENTS = (119, 120, 121)  # E8M0 biased exponents: 2^-8..2^-6, so |w| <= 0.09, std about 0.024


@dataclass(frozen=True)
class MoeSpec:
    name: str
    build_version: str  # change it whenever this model's bytes change
    dims: dict[str, Any]
    reference: bool = True  # write the transformers checkpoint (the fidelity reference)
    dspark: dict[str, Any] = field(default_factory=dict)
    # keep the DeepSeek-layout checkpoint in `deepseek/` (exllamav3's converter reads DeepSeek-V4 in that
    # layout: scripts/device_exl3.sh quantizes it to EXL3 there)
    keep_layout: bool = False

    @property
    def gguf(self) -> str:
        return f"{self.name}.gguf"

    @property
    def draft_gguf(self) -> str:
        return f"{self.name}-dspark.gguf"

    @property
    def layers(self) -> int:
        return int(self.dims["num_hidden_layers"])


TINY_DIMS: dict[str, Any] = {
    "hidden_size": 128,
    "num_hidden_layers": 6,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    # llama.cpp (the xllamacpp wheel) needs the indexer's head to be a multiple of 64 (its keys get a 64-wide
    # Hadamard rotation) and different from the attention head (else it rotates the raw cache too, and a
    # K-only cache has no V rows to size the rotation by: a division by zero), as in DeepSeek-V4 (512 / 128)
    "head_dim": 128,
    "qk_rope_head_dim": 32,
    "q_lora_rank": 64,
    "o_groups": 2,
    "o_lora_rank": 64,
    "moe_intermediate_size": 64,
    "n_routed_experts": 16,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "num_hash_layers": 2,
    "compress_ratios": [0, 4, 128, 4, 128, 0],  # sliding, CSA (1/4 + indexer), HCA (1/128)
    "index_n_heads": 4,
    "index_head_dim": 64,
    "index_topk": 16,
    "sliding_window": 64,
    "hc_mult": 4,
}
GPU_DIMS: dict[str, Any] = {
    **TINY_DIMS,
    "hidden_size": 2048,
    "num_hidden_layers": 12,
    "num_attention_heads": 16,
    "head_dim": 128,
    "qk_rope_head_dim": 32,
    "q_lora_rank": 512,
    "o_groups": 4,
    "o_lora_rank": 512,
    "moe_intermediate_size": 1024,
    "n_routed_experts": 64,
    "num_experts_per_tok": 6,
    "num_hash_layers": 3,
    "compress_ratios": [0, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 0],
    "index_n_heads": 8,
    "index_head_dim": 64,
    "index_topk": 64,
    "sliding_window": 128,
}
DSPARK = {"dspark_block_size": 4, "markov_rank": 32}
# exllamav3's CPU-expert runtime on the H200 in one GPU session: the GPU shape at about 1.2B parameters (DESIGN.md
# section 11, "Sizing the EXL3 side"), experts large enough that a third on the CPU is a real share of a step.
EXL3_DIMS: dict[str, Any] = {
    **GPU_DIMS,
    "hidden_size": 1024,
    "num_attention_heads": 8,
    "q_lora_rank": 256,
    "o_lora_rank": 256,
    "moe_intermediate_size": 512,
}

MODELS = {
    "tiny-frank-moe": MoeSpec("tiny-frank-moe", "tiny-frank-moe-1", TINY_DIMS, True, DSPARK),
    "frank-moe-gpu": MoeSpec("frank-moe-gpu", "frank-moe-gpu-1", GPU_DIMS, False, DSPARK),
    "frank-moe-exl3": MoeSpec("frank-moe-exl3", "frank-moe-exl3-2", EXL3_DIMS, False, DSPARK, keep_layout=True),
}


def exl3_layout_config(config: dict[str, Any], spec: MoeSpec) -> dict[str, Any]:
    """config.json of the kept DeepSeek layout, for exllamav3 (architecture/deepseek_v4.py): it finds the DSpark
    stage from compress_ratios running one entry past the trunk (the stage's sliding window: 0) and reads the
    Markov head's rank from dspark_markov_rank (its default is 256). llama.cpp's converter gets the plain one."""
    return {
        **config,
        "compress_ratios": [*config["compress_ratios"], 0],
        "dspark_markov_rank": spec.dspark["markov_rank"],
    }


def spec_for(name: str) -> MoeSpec:
    from frank.errors import FrankError

    try:
        return MODELS[name]
    except KeyError:
        raise FrankError(f"no built-in MoE model {name!r}: expected one of {', '.join(MODELS)}") from None


def config_for(spec: MoeSpec) -> dict[str, Any]:
    """config.json in DeepSeek's own style (the keys llama.cpp's converter reads: num_hash_layers,
    compress_ratios, qk_rope_head_dim), which transformers' DeepseekV4Config folds into its own fields."""
    d = spec.dims
    draft = spec.dspark
    return {
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "vocab_size": tiny_model.VOCAB_SIZE,
        **d,
        "scoring_func": "sqrtsoftplus",
        "norm_topk_prob": True,
        "routed_scaling_factor": 1.5,
        "swiglu_limit": 10.0,
        "rope_theta": 10000.0,
        "compress_rope_theta": 160000.0,
        "hc_sinkhorn_iters": 20,
        "hc_eps": 1e-06,
        "rms_norm_eps": 1e-06,
        "max_position_embeddings": 65536,
        "num_nextn_predict_layers": 0,
        "initializer_range": 0.02,
        "tie_word_embeddings": False,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": 2,
        "dtype": "float32",
        "dspark_block_size": draft["dspark_block_size"],
        # the target layers whose hidden states the draft reads: the first, the middle and the last
        "dspark_target_layer_ids": [1, d["num_hidden_layers"] // 2, d["num_hidden_layers"] - 1],
        "dspark_noise_token_id": 2,  # the pad token stands for the block's unknown positions
    }


def default_dir(name: str = "tiny-frank-moe") -> Path:
    from frank import paths

    return paths.models_dir() / spec_for(name).name


def check_build(model_dir: Path, name: str = "tiny-frank-moe") -> str | None:
    return tiny_model.check_build_version(model_dir, spec_for(name).build_version)


def build_via_engine_venv(
    out: Path | None = None, force: bool = False, python: Path | None = None, timeout_s: float = 1800,
    name: str = "tiny-frank-moe",
) -> tiny_model.BuildResult:  # fmt: skip
    """Build (or confirm) the model from the console side; the work runs in the engine venv."""
    from frank.errors import FrankError

    problem = llamacpp_convert.check_source()
    if problem:
        raise FrankError(problem)
    spec = spec_for(name)
    return tiny_model.run_builder(
        "frank.engine.models.moe_model", out or default_dir(name), force, python, timeout_s, name, spec.build_version
    )


# ---------------------------------------------------------------- builder half (engine venv)


KIT_SHAPES = "shapes.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def hf_shapes(config: dict[str, Any], kit: Path | None = None, part: str = "target") -> dict[str, tuple[int, ...]]:
    """transformers' DeepseekV4ForCausalLM state dict as {name: shape}, from a meta-device build, or from a
    kit (`kit` below) made where transformers knows DeepSeek-V4 (a GPU machine's may be older)."""
    if kit is not None:
        shapes = json.loads((kit / KIT_SHAPES).read_text())[part]
        return {name: tuple(shape) for name, shape in shapes.items()}
    import torch
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

    keys = {"dspark_block_size", "dspark_target_layer_ids", "dspark_noise_token_id"}
    with torch.device("meta"):
        model = DeepseekV4ForCausalLM(DeepseekV4Config(**{k: v for k, v in config.items() if k not in keys}))
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def dspark_block_config(config: dict[str, Any]) -> dict[str, Any]:
    """The DSpark stage as a one-layer DeepSeek-V4: no hash routing, no compression (its sliding window)."""
    return {**config, "num_hidden_layers": 1, "num_hash_layers": 0, "compress_ratios": [0]}


def make_kit(name: str, out: Path) -> dict[str, Any]:
    """What a machine without DeepSeek-V4 in its transformers needs to build model `name`: the state-dict
    shapes of the target and of the DSpark stage (names checked against transformers' mapping here) and
    the tokenizer files. Engine venv."""
    config = config_for(spec_for(name))
    out.mkdir(parents=True, exist_ok=True)
    target, block = hf_shapes(config), hf_shapes(dspark_block_config(config))
    check_names(_layout_names(target))
    tiny_model.write_json(out / KIT_SHAPES, {"target": target, "block": block})
    tiny_model._train_tokenizer(out)
    return {"kit": str(out), "model": name, "tensors": len(target) + len(block)}


def _layout_names(shapes: dict[str, tuple[int, ...]]) -> dict[str, str]:
    """{DeepSeek name: transformers name} of a target's tensors, each routed expert's w1/w2/w3 included."""
    names = {}
    for name, shape in shapes.items():
        match = re.match(r"model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)$", name)
        if not match:
            names[ds_name(name)] = name
            continue
        for e in range(shape[0]):
            for w in ("w1", "w3") if match.group(2) == "gate_up_proj" else ("w2",):
                names[f"layers.{match.group(1)}.ffn.experts.{e}.{w}.weight"] = name
    return names


class Draw:
    """The seeded generator and the init rules of transformers' DeepseekV4PreTrainedModel._init_weights."""

    def __init__(self, seed: int, std: float) -> None:
        import torch

        self.torch = torch
        self.gen = torch.Generator().manual_seed(seed)
        self.std = std

    def normal(self, *shape: int):
        return self.torch.randn(*shape, generator=self.gen, dtype=self.torch.float32) * self.std

    def fp4(self, rows: int, cols: int, values: bool = True):
        """One FP4 matrix: (packed codes I8 [rows, cols/2], E8M0 scales [rows, cols/32], float32 values or
        None when not asked for)."""
        torch = self.torch
        codes = torch.randint(0, 16, (rows, cols), generator=self.gen, dtype=torch.uint8)
        pick = torch.randint(0, len(SCALE_EXPONENTS), (rows, cols // 32), generator=self.gen)
        scales = torch.tensor(SCALE_EXPONENTS, dtype=torch.uint8)[pick]
        packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).view(torch.int8)
        exact = None
        if values:
            exact = torch.tensor(E2M1)[codes.long()] * torch.exp2(scales.float() - 127).repeat_interleave(32, 1)
        return packed, scales.view(torch.float8_e8m0fnu), exact

    def tensor(self, name: str, shape: tuple[int, ...], config: dict[str, Any]):
        torch = self.torch
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "tid2eid":  # k distinct experts per token id
            order = torch.rand(shape[0], config["n_routed_experts"], generator=self.gen).argsort(dim=1)
            return order[:, : shape[1]].contiguous()
        if re.search(r"norm\.weight$|layernorm\.weight$", name) or leaf in ("scale", "hc_scale"):
            return torch.ones(shape)
        if leaf in ("sinks", "base", "hc_base", "position_bias", "e_score_correction_bias"):
            return torch.zeros(shape)
        return self.normal(*shape)


# transformers name (without "model.") -> DeepSeek's, the inverse of transformers' conversion mapping for
# deepseek_v4 (conversion_mapping.py); `check_names` runs that mapping forward on every name.
HF_TO_DS = [
    (r"^embed_tokens\.weight$", "embed.weight"),
    (r"^lm_head\.weight$", "head.weight"),
    (r"^norm\.weight$", "norm.weight"),
    (r"^hc_head\.hc_(fn|base|scale)$", r"hc_head_\1"),
    (r"\.attn_hc\.(fn|base|scale)$", r".hc_attn_\1"),
    (r"\.ffn_hc\.(fn|base|scale)$", r".hc_ffn_\1"),
    (r"\.input_layernorm\.", ".attn_norm."),
    (r"\.post_attention_layernorm\.", ".ffn_norm."),
    (r"\.self_attn\.sinks$", ".attn.attn_sink"),
    (r"\.self_attn\.q_a_proj\.", ".attn.wq_a."),
    (r"\.self_attn\.q_a_norm\.", ".attn.q_norm."),
    (r"\.self_attn\.q_b_proj\.", ".attn.wq_b."),
    (r"\.self_attn\.kv_proj\.", ".attn.wkv."),
    (r"\.self_attn\.kv_norm\.", ".attn.kv_norm."),
    (r"\.self_attn\.o_a_proj\.", ".attn.wo_a."),
    (r"\.self_attn\.o_b_proj\.", ".attn.wo_b."),
    (r"\.self_attn\.compressor\.indexer\.q_b_proj\.", ".attn.indexer.wq_b."),
    (r"\.self_attn\.compressor\.indexer\.scorer\.weights_proj\.", ".attn.indexer.weights_proj."),
    (r"\.self_attn\.compressor\.indexer\.position_bias$", ".attn.indexer.compressor.ape"),
    (r"\.self_attn\.compressor\.indexer\.kv_proj\.", ".attn.indexer.compressor.wkv."),
    (r"\.self_attn\.compressor\.indexer\.gate_proj\.", ".attn.indexer.compressor.wgate."),
    (r"\.self_attn\.compressor\.indexer\.kv_norm\.", ".attn.indexer.compressor.norm."),
    (r"\.self_attn\.compressor\.position_bias$", ".attn.compressor.ape"),
    (r"\.self_attn\.compressor\.kv_proj\.", ".attn.compressor.wkv."),
    (r"\.self_attn\.compressor\.gate_proj\.", ".attn.compressor.wgate."),
    (r"\.self_attn\.compressor\.kv_norm\.", ".attn.compressor.norm."),
    (r"\.mlp\.gate\.e_score_correction_bias$", ".ffn.gate.bias"),
    (r"\.mlp\.gate\.(weight|tid2eid)$", r".ffn.gate.\1"),
    (r"\.mlp\.shared_experts\.gate_proj\.", ".ffn.shared_experts.w1."),
    (r"\.mlp\.shared_experts\.down_proj\.", ".ffn.shared_experts.w2."),
    (r"\.mlp\.shared_experts\.up_proj\.", ".ffn.shared_experts.w3."),
]


def ds_name(hf: str) -> str:
    name = hf.removeprefix("model.")
    for pattern, repl in HF_TO_DS:
        name, n = re.subn(pattern, repl, name)
        if n:
            return name
    raise ValueError(f"no DeepSeek name for transformers tensor {hf!r}")


# The dtypes of DeepSeek-V4's own checkpoint (inference/model.py of DeepSeek-V4-Flash), which exllamav3's
# DeepSeek-V4 loader assumes: float32 for the attention sinks (attn_sink), the compressors' position biases
# (ape, the indexer's too), the mHC parameters (hc_attn_*, hc_ffn_*, hc_head_* {fn, base, scale}, the DSpark
# stage's too) and the router's score-correction bias (ffn.gate.bias), all read back with .float(); every
# other floating tensor bf16 (exllamav3 reads bf16 as fp16, but leaves float32 float32: a float32 wo_a
# reaches an fp16 matmul as float). Integer tensors (tid2eid, FP4 codes) and E8M0 scales keep theirs.
EXL3_FLOAT32 = re.compile(r"(^|\.)(attn_sink|ape|hc_(attn|ffn|head)_(fn|base|scale)|ffn\.gate\.bias)$")


def exl3_dtype(name: str, dtype: Any) -> Any:
    """The dtype tensor `name` (DeepSeek layout) has in the checkpoint kept for exllamav3 (`deepseek/`)."""
    import torch

    if dtype not in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
        return dtype
    return torch.float32 if EXL3_FLOAT32.search(name) else torch.bfloat16


def exl3_fix_dtypes(path: Path) -> dict[str, int]:
    """Rewrite the DeepSeek-layout safetensors file `path` in place (temp file + rename) with `exl3_dtype`'s
    dtypes. Returns the tensors changed per "from->to" (empty, and the file untouched, when all are right)."""
    import torch
    from safetensors import safe_open

    floats = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
    path = Path(path)
    changed: dict[str, int] = {}
    targets: dict[str, Any] = {}
    with safe_open(str(path), framework="pt") as f:
        names = list(f.keys())
        for name in names:
            dtype = floats.get(f.get_slice(name).get_dtype())  # None: not a plain float (ints, F8_E8M0)
            want = exl3_dtype(name, dtype) if dtype is not None else None
            if want is not None and want != dtype:
                targets[name] = want
                key = f"{str(dtype).removeprefix('torch.')}->{str(want).removeprefix('torch.')}"
                changed[key] = changed.get(key, 0) + 1
        if not targets:
            return changed
        tensors = {}
        for name in names:  # converted as read: the float32 copy of the whole file is never held
            t = f.get_tensor(name)
            tensors[name] = t.to(targets[name]) if name in targets else t
    tmp = path.with_name(f".{path.name}.dtypes-tmp")
    try:
        tiny_model.save_safetensors(tensors, tmp)
        del tensors
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return changed


def check_names(pairs: dict[str, str]) -> None:
    """Run transformers' own DeepSeek -> transformers renaming (what from_pretrained applies to a DeepSeek
    checkpoint) on every DeepSeek name we write, experts included, and insist it gives our transformers name."""
    from transformers.conversion_mapping import get_checkpoint_conversion_mapping
    from transformers.core_model_loading import WeightRenaming, rename_source_key

    rules = get_checkpoint_conversion_mapping("deepseek_v4")
    renamings = [r for r in rules if isinstance(r, WeightRenaming)]
    converters = [r for r in rules if not isinstance(r, WeightRenaming)]
    for ds, hf in pairs.items():
        name, _ = rename_source_key(ds, renamings, converters)
        if name.removeprefix("model.") != hf.removeprefix("model."):
            raise RuntimeError(f"DeepSeek name {ds!r} maps to {name!r} in transformers, not {hf!r}")


def draw_weights(
    spec: MoeSpec, config: dict[str, Any], kit: Path | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(transformers state dict, DeepSeek-layout state dict incl. the DSpark stage) from one seeded draw. The
    transformers side is left empty for a model without a reference (its experts' float values are never
    made: the GPU size's would be 19 GB)."""
    import torch

    torch.set_num_threads(1)
    draw = Draw(SEED, config["initializer_range"])
    hf: dict[str, Any] = {}
    ds: dict[str, Any] = {}
    shapes = hf_shapes(config, kit)
    if kit is None:
        check_names(_layout_names(shapes))
    for name, shape in sorted(shapes.items()):
        match = re.match(r"model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)$", name)
        if match:
            prefix = f"layers.{match.group(1)}.ffn.experts"
            values = _draw_experts(draw, ds, prefix, match.group(2), shape, spec.reference)
        else:
            values = draw.tensor(name, shape, config)
            ds[ds_name(name)] = values.to(torch.int32) if values.dtype == torch.int64 else values
        if spec.reference:
            hf[name] = values
    ds.update(_draw_dspark(draw, spec, config, kit))
    return hf, ds


def _draw_experts(draw: Draw, ds: dict[str, Any], prefix: str, which: str, shape: tuple[int, ...], values: bool = True):
    """One layer's routed experts: FP4 in DeepSeek's layout (w1 gate, w3 up, w2 down per expert), their exact
    float32 values stacked as transformers' fused tensor (gate_up_proj = [w1; w3], down_proj = w2), or
    None without `values`."""
    import torch

    n_experts, rows, cols = shape
    stacked = []
    for e in range(n_experts):
        parts = ("w1", "w3") if which == "gate_up_proj" else ("w2",)
        rows_each = rows // len(parts)
        exact = []
        for w in parts:
            packed, scale, value = draw.fp4(rows_each, cols, values)
            ds[f"{prefix}.{e}.{w}.weight"] = packed
            ds[f"{prefix}.{e}.{w}.scale"] = scale
            exact.append(value)
        if values:
            stacked.append(torch.cat(exact, dim=0))
    return torch.stack(stacked) if values else None


def _draw_dspark(draw: Draw, spec: MoeSpec, config: dict[str, Any], kit: Path | None = None) -> dict[str, Any]:
    """One DSpark stage (`mtp.0.*`): a DeepSeek-V4 block without compression (its sliding window only), the
    projection of the target's hidden states (main_proj), the Markov head and the confidence head."""
    import torch

    d = spec.dims
    h, vocab, rank = d["hidden_size"], tiny_model.VOCAB_SIZE, spec.dspark["markov_rank"]
    block_config = dspark_block_config(config)
    out: dict[str, Any] = {}
    for name, shape in sorted(hf_shapes(block_config, kit, "block").items()):
        if name.startswith(("model.embed_tokens", "lm_head")):
            continue  # the draft reads the target's embeddings and head
        match = re.match(r"model\.layers\.0\.mlp\.experts\.(gate_up_proj|down_proj)$", name)
        if match:
            _draw_experts(draw, out, "mtp.0.ffn.experts", match.group(1), shape, values=False)
            continue
        ds = ds_name(name)
        out["mtp.0." + ds.removeprefix("layers.0.")] = draw.tensor(name, shape, block_config)
    n_targets = len(config["dspark_target_layer_ids"])
    out["mtp.0.main_proj.weight"] = draw.normal(h, n_targets * h)
    out["mtp.0.main_norm.weight"] = torch.ones(h)
    out["mtp.0.markov_head.markov_w1.weight"] = draw.normal(vocab, rank)
    out["mtp.0.markov_head.markov_w2.weight"] = draw.normal(vocab, rank)
    out["mtp.0.confidence_head.proj.weight"] = draw.normal(1, h + rank)
    return out


def _current_tiny_frank(models: Path) -> Path | None:
    """A current tiny-frank build beside this one: its tokenizer is exactly the one we would train."""
    folder = models / tiny_model.MODEL_NAME
    return folder if tiny_model.check_build(folder) is None else None


def build(
    out: Path, force: bool = False, name: str = "tiny-frank-moe", kit: Path | None = None
) -> tiny_model.BuildResult:
    """Build model `name` into `out` (atomically: temp dir + rename). Skips a current build unless `force`.
    With a `kit` (make_kit), its shapes and tokenizer stand in for transformers and the BPE training."""
    spec = spec_for(name)
    out = out.expanduser().resolve()
    if not force and check_build(out, name) is None:
        return tiny_model.result(out, name, spec.build_version, built=False, reason="up to date", build_s=0.0)
    started = time.monotonic()
    config = config_for(spec)

    def fill(tmp: Path) -> None:
        source = kit or _current_tiny_frank(out.parent)
        if source is None:
            tiny_model._train_tokenizer(tmp)
        else:  # the same trainer's bytes: copied instead of trained again (27 s on 2 cores)
            for f in TOKENIZER_FILES:
                (tmp / f).write_bytes((source / f).read_bytes())
        hf, ds = draw_weights(spec, config, kit)
        with tempfile.TemporaryDirectory(prefix=".deepseek-", dir=tmp.parent) as layout:
            ds_dir = Path(layout) / name  # the converter reads metadata from the folder's name: keep it fixed
            ds_dir.mkdir()
            for f in TOKENIZER_FILES:
                (ds_dir / f).write_bytes((tmp / f).read_bytes())
            tiny_model.write_json(ds_dir / "config.json", config)
            tiny_model.save_safetensors(ds, ds_dir / "model.safetensors")
            del ds
            named = ("--model-name", name)  # else the GGUF is named after the temp dir
            llamacpp_convert.convert(ds_dir, tmp / spec.gguf, *named)
            dspark = ("--dspark", "--target-model-dir", str(ds_dir))
            llamacpp_convert.convert(ds_dir, tmp / spec.draft_gguf, *named, *dspark)
            if spec.keep_layout:  # llama.cpp's converter read the float32 draw; exllamav3 reads DeepSeek's dtypes
                exl3_fix_dtypes(ds_dir / "model.safetensors")
                tiny_model.write_json(ds_dir / "config.json", exl3_layout_config(config, spec))
                ds_dir.rename(tmp / "deepseek")
        if spec.reference:
            tiny_model.save_safetensors(hf, tmp / "model.safetensors")
            tiny_model.write_json(tmp / "config.json", config)
            ids = {"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2}
            tiny_model.write_json(tmp / "generation_config.json", ids)
        tiny_model.write_manifest(tmp, name, spec.build_version)

    tiny_model.build_dir_atomically(out, fill)
    return tiny_model.result(
        out, name, spec.build_version, built=True, reason="built", build_s=time.monotonic() - started
    )


def main(argv: list[str] | None = None) -> int:
    prog = "python -m frank.engine.models.moe_model"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the MoE and its DSpark draft (engine venv)")
    b.add_argument("--model", default="tiny-frank-moe", choices=sorted(MODELS))
    b.add_argument("--out", type=Path, default=None)
    b.add_argument("--force", action="store_true")
    b.add_argument("--kit", type=Path, default=None, help="shapes and tokenizer from `kit` (no transformers needed)")
    k = sub.add_parser("kit", help="what a machine whose transformers lacks DeepSeek-V4 needs to build a model")
    k.add_argument("--model", default="frank-moe-gpu", choices=sorted(MODELS))
    k.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    os.environ["RAYON_NUM_THREADS"] = "1"  # BPE training on one thread: the same merges everywhere
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.cmd == "kit":
        print(json.dumps(make_kit(args.model, args.out)))
        return 0
    out = args.out or default_dir(args.model)
    print(json.dumps(build(out, force=args.force, name=args.model, kit=args.kit).to_json(), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
