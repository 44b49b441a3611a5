"""A Llama-family checkpoint widened to exllamav3's 128-wide blocks, computing the same function.

exllamav3 1.6.5 pads every linear to a multiple of 128 and trims the padded outputs at run time, but its
converter does not: SmolLM2-135M's 576-wide residual came back 640 wide from the first layer it quantized
(docs/gpu-run.md, "SmolLM2's EXL3 row"). Widened here first, no dimension needs padding or trimming, and the
model is the same function:

- the residual stream goes from H to H' (the next multiple of 128 that the query heads divide, as
  transformers' Llama config requires) with zeros: the embeddings (and an
  untied head) gain zero columns; every linear that reads the stream gains zero input columns; every linear
  that writes it gains zero output rows, so the new dimensions stay exactly zero;
- RMSNorm averages over H' now, so each norm's weight is scaled by sqrt(H / H') and its eps by H / H':
  w * sqrt(H/H') * x / sqrt(sum(x^2)/H' + eps*H/H') = w * x / sqrt(sum(x^2)/H + eps); the new dimensions'
  weights are zero;
- whole zero key/value heads are appended until the K/V width is a multiple of 128, each with its group's
  number of zero query heads (query heads are grouped contiguously, so the real heads keep their groups).
  A zero query head attends uniformly over its zero values and writes nothing; o_proj's columns for it are
  zero anyway. head_dim is written out, so the attention scale and RoPE are unchanged;
- the MLP's intermediate width gains zero gate/up rows and zero down columns (act(0) * 0 = 0).

Runs in the engine venv (torch, transformers for `check`):

    python -m frank.engine.models.exl3_widen widen SRC OUT       the widened checkpoint (tokenizer files copied)
    python -m frank.engine.models.exl3_widen check SRC OUT       both in float32 on one text: the largest
                                                                 KL and log-probability difference, as JSON;
                                                                 exit 1 when the KL is over --max-kl (1e-8)
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from pathlib import Path
from typing import Any

from frank.engine.models import tiny_model

MULTIPLE = 128
# the widened model must be the same function: float32 rounding of the rescaled norms leaves about 1e-10 on
# SmolLM2, and quantization's KL is 1e-3 and up
MAX_KL = 1e-8
ARCHITECTURES = ("LlamaForCausalLM",)
# what the converter and the engine read beside the weights
COPIED = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "generation_config.json",
)
CHECK_TEXT = (
    "def merge(a, b):\n    out = []\n    while a and b:\n        out.append(a.pop(0) if a[0] < b[0] else b.pop(0))\n"
    "    return out + a + b\n\nThe engine reads the profile, starts the server and waits for /health."
)


def round_up(n: int, multiple: int) -> int:
    return (n + multiple - 1) // multiple * multiple


def widened_shape(config: dict[str, Any], multiple: int = MULTIPLE) -> dict[str, int]:
    """The widths after widening: hidden, query and key/value heads (head_dim kept), intermediate."""
    arch = (config.get("architectures") or ["?"])[0]
    if arch not in ARCHITECTURES:
        raise ValueError(f"config.json: architectures: {arch!r} is not one of {', '.join(ARCHITECTURES)}")
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    kv = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    if heads % kv:
        raise ValueError(f"config.json: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}")
    kv_wide = kv
    while (kv_wide * head_dim) % multiple:
        kv_wide += 1
    heads_wide = kv_wide * (heads // kv)
    hidden_wide = round_up(hidden, multiple)
    while hidden_wide % heads_wide:  # transformers' Llama config wants the hidden size split evenly over the heads
        hidden_wide += multiple
    return {
        "hidden_size": hidden_wide,
        "num_attention_heads": heads_wide,
        "num_key_value_heads": kv_wide,
        "head_dim": head_dim,
        "intermediate_size": round_up(int(config["intermediate_size"]), multiple),
    }


def widen_tensors(tensors: dict[str, Any], config: dict[str, Any], multiple: int = MULTIPLE) -> dict[str, Any]:
    """The widened state dict (float tensors of any dtype; names as Hugging Face's Llama writes them)."""
    import torch

    wide = widened_shape(config, multiple)
    hidden, hidden_w = int(config["hidden_size"]), wide["hidden_size"]
    d = wide["head_dim"]
    q_w, kv_w, inter_w = wide["num_attention_heads"] * d, wide["num_key_value_heads"] * d, wide["intermediate_size"]
    norm_scale = math.sqrt(hidden / hidden_w)

    def pad(t: Any, rows: int, cols: int | None = None) -> Any:
        out = torch.zeros((rows,) if cols is None else (rows, cols), dtype=t.dtype)
        if cols is None:
            out[: t.shape[0]] = t
        else:
            out[: t.shape[0], : t.shape[1]] = t
        return out

    out: dict[str, Any] = {}
    for name, t in tensors.items():
        leaf = name.rsplit(".", 2)[-2:]  # e.g. ["q_proj", "weight"]
        part, kind = leaf[0], leaf[-1]
        if name.endswith("norm.weight"):  # input_layernorm, post_attention_layernorm, model.norm
            out[name] = pad((t.double() * norm_scale).to(t.dtype), hidden_w)
        elif part in ("embed_tokens", "lm_head"):
            out[name] = pad(t, t.shape[0], hidden_w)
        elif part in ("q_proj", "k_proj", "v_proj"):
            rows = q_w if part == "q_proj" else kv_w
            out[name] = pad(t, rows, hidden_w) if kind == "weight" else pad(t, rows)
        elif part == "o_proj":
            out[name] = pad(t, hidden_w, q_w) if kind == "weight" else pad(t, hidden_w)
        elif part in ("gate_proj", "up_proj"):
            out[name] = pad(t, inter_w, hidden_w) if kind == "weight" else pad(t, inter_w)
        elif part == "down_proj":
            out[name] = pad(t, hidden_w, inter_w) if kind == "weight" else pad(t, hidden_w)
        elif name.endswith("rotary_emb.inv_freq"):
            out[name] = t
        else:
            raise ValueError(f"{name}: a tensor the widening does not know (shape {tuple(t.shape)})")
    return out


def widen(src: Path, out: Path, multiple: int = MULTIPLE) -> dict[str, Any]:
    """Write the widened checkpoint of SRC (config.json, model.safetensors, tokenizer files) into OUT."""
    from safetensors.torch import load_file

    config = json.loads((src / "config.json").read_text())
    wide = widened_shape(config, multiple)
    tensors = widen_tensors(load_file(str(src / "model.safetensors")), config, multiple)
    out.mkdir(parents=True, exist_ok=True)
    tiny_model.save_safetensors(tensors, out / "model.safetensors")
    eps = float(config.get("rms_norm_eps", 1e-6)) * int(config["hidden_size"]) / wide["hidden_size"]
    tiny_model.write_json(out / "config.json", {**config, **wide, "rms_norm_eps": eps})
    for name in COPIED:
        if (src / name).is_file():
            shutil.copyfile(src / name, out / name)
    return {"src": str(src), "out": str(out), "from": {k: config.get(k) for k in wide}, "to": wide, "rms_norm_eps": eps}


def check(src: Path, wide: Path, text: str = CHECK_TEXT) -> dict[str, Any]:
    """Both checkpoints in float32 (as the fidelity reference runs) on one text: the largest KL of the widened
    model's next-token distribution from the original's, the largest log-probability difference, and whether
    every position's most likely token is the same. The norm weights' float32 rounding is what is left."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ids = torch.tensor([AutoTokenizer.from_pretrained(str(src)).encode(text)])
    logprobs = []
    for folder in (src, wide):
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32, attn_implementation="eager")
        with torch.no_grad():
            logprobs.append(torch.log_softmax(model(ids).logits[0].double(), dim=-1))
    reference, widened = logprobs
    kl = (reference.exp() * (reference - widened)).sum(-1)
    return {
        "tokens": int(ids.shape[1]),
        "max_kl": float(kl.max()),
        "max_abs_logprob_diff": float((reference - widened).abs().max()),
        "same_argmax": bool((reference.argmax(-1) == widened.argmax(-1)).all()),
    }


def main(argv: list[str] | None = None) -> int:
    prog = "python -m frank.engine.models.exl3_widen"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for cmd, what in (("widen", "write the widened checkpoint"), ("check", "compare the two in float32")):
        p = sub.add_parser(cmd, help=what)
        p.add_argument("src", type=Path)
        p.add_argument("out", type=Path)
    sub.choices["widen"].add_argument("--multiple", type=int, default=MULTIPLE)
    sub.choices["check"].add_argument("--max-kl", type=float, default=MAX_KL)
    args = parser.parse_args(argv)
    try:
        result = widen(args.src, args.out, args.multiple) if args.cmd == "widen" else check(args.src, args.out)
    except (OSError, ValueError, KeyError) as exc:
        print(f"exl3_widen: {args.src}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, sort_keys=True))
    if args.cmd == "check" and not result["max_kl"] <= args.max_kl:
        print(f"exl3_widen: {args.out} is not the same function as {args.src}: KL {result['max_kl']:.3g} "
              f"over {args.max_kl:g}", file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
