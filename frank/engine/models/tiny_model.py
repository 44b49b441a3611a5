"""The embedded engine's tiny model: a byte-level BPE tokenizer and a random-weight Llama, built deterministically.

Two halves in one module:
- stdlib-only helpers (import-safe in the console venv): where the model lives, its manifest (builder version
  + sha256 of every file), whether a directory holds a current build, and `build_via_engine_venv`, which runs
  the heavy half in the engine venv as a subprocess.
- the builder (`python -m frank.engine.models.tiny_model build --out DIR`, engine venv only: tokenizers, torch,
  safetensors are imported inside the functions). It writes into a temp dir next to DIR and renames it into
  place, so a reader never sees a half-built model.

Same BUILD_VERSION => same bytes: the training corpus comes from a fixed seed (frank.engine.models.tiny_corpus), BPE
training runs on one thread, weights come from a seeded torch generator, and every JSON file is written
with sorted keys and no timestamps. Change BUILD_VERSION whenever any of that changes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

BUILD_VERSION = "tiny-frank-2"
MODEL_NAME = "tiny-frank"
MANIFEST = "manifest.json"
VOCAB_SIZE = 8192  # BPE merges + byte alphabet + control tokens, all together
SEED = 1234

# DeepSeek-style control tokens. BOS/EOS and the role/tool markers are `special` (dropped by
# skip_special_tokens); <think> and the DSML tags are plain added tokens, as in DeepSeek's own tokenizers,
# so reasoning and tool-call parsers see them in the output text. The first group is what vLLM's
# deepseek_v4/deepseek_v41 prompt encoders emit; the second is DeepSeek-V3's tool-call markers, which this
# model's Jinja chat template uses. Each is one token, so prompts cut cleanly at them.
BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
PAD = "<｜▁pad▁｜>"
SPECIAL_TOKENS = (
    BOS,
    EOS,
    PAD,
    "<｜User｜>",
    "<｜Assistant｜>",
    "<｜System｜>",
    "<｜latest_reminder｜>",
    "<｜deepseek_image｜>",
    "<｜action｜>",
    "<｜query｜>",
    "<｜authority｜>",
    "<｜domain｜>",
    "<｜title｜>",
    "<｜read_url｜>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁outputs▁begin｜>",
    "<｜tool▁output▁begin｜>",
    "<｜tool▁output▁end｜>",
    "<｜tool▁outputs▁end｜>",
)
PLAIN_ADDED_TOKENS = (
    "<think>",
    "</think>",
    "<｜DSML｜ calls>",
    "</｜DSML｜ calls>",  # DeepSeek-V4.1 tool-call block
    "<｜DSML｜tool_calls>",
    "</｜DSML｜tool_calls>",  # DeepSeek-V4 tool-call block
    "｜DSML｜",  # inside invoke/parameter tags
    "<tool_result>",
    "</tool_result>",  # V4/V4.1 tool outputs (merged into user turns)
)
CONTROL_TOKENS = SPECIAL_TOKENS + PLAIN_ADDED_TOKENS

# DeepSeek-style chat template for the HF renderer path (apply_chat_template). Turns, tool calls and tool
# outputs are delimited by the control tokens above. Tool-call arguments may arrive as a JSON string
# (OpenAI format) or already parsed into a dict. Newlines right after a block tag are written as {{ '\n' }}:
# transformers renders with trim_blocks, which eats them.
CHAT_TEMPLATE = (
    "{%- set ns = namespace(system='', in_outputs=false) -%}"
    "{%- for m in messages if m['role'] == 'system' -%}"
    "{%- set ns.system = ns.system + ('\\n\\n' if ns.system else '') + (m['content'] or '') -%}"
    "{%- endfor -%}"
    "{{ bos_token }}"
    "{%- if ns.system or tools %}<｜System｜>{{ ns.system }}{% endif -%}"
    "{%- if tools -%}"
    "{{ '\\n\\n' if ns.system else '' }}## Tools\n\nCall a tool with a <｜tool▁calls▁begin｜> block.\n"
    "{%- for t in tools %}{{ '\\n' }}{{ (t['function'] if t['function'] is defined else t) | tojson }}{% endfor -%}"
    "{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m['role'] != 'tool' and ns.in_outputs -%}"
    "<｜tool▁outputs▁end｜>{%- set ns.in_outputs = false -%}"
    "{%- endif -%}"
    "{%- if m['role'] == 'user' -%}"
    "<｜User｜>{{ m['content'] or '' }}"
    "{%- elif m['role'] == 'assistant' -%}"
    "<｜Assistant｜></think>{{ m['content'] or '' }}"
    "{%- if m['tool_calls'] is defined and m['tool_calls'] -%}"
    "<｜tool▁calls▁begin｜>"
    "{%- for tc in m['tool_calls'] -%}"
    "{%- set f = tc['function'] if tc['function'] is defined else tc -%}"
    "<｜tool▁call▁begin｜>{{ tc['type'] if tc['type'] is defined else 'function' }}<｜tool▁sep｜>{{ f['name'] }}"
    "\n```json\n{{ f['arguments'] if f['arguments'] is string else (f['arguments'] | tojson) }}\n```"
    "<｜tool▁call▁end｜>"
    "{%- endfor -%}"
    "<｜tool▁calls▁end｜>"
    "{%- endif -%}"
    "<｜end▁of▁sentence｜>"
    "{%- elif m['role'] == 'tool' -%}"
    "{%- if not ns.in_outputs %}<｜tool▁outputs▁begin｜>{% set ns.in_outputs = true %}{% endif -%}"
    "<｜tool▁output▁begin｜>{{ m['content'] or '' }}<｜tool▁output▁end｜>"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if ns.in_outputs %}<｜tool▁outputs▁end｜>{% endif -%}"
    "{%- if add_generation_prompt -%}"
    "<｜Assistant｜>{{ '<think>' if (thinking is defined and thinking) else '</think>' }}"
    "{%- endif -%}"
)

# Llama shape: small enough to prefill ~30K tokens in seconds on 2 cores; long context for W01's 175K prompts.
MODEL_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": VOCAB_SIZE,
    "hidden_size": 64,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "hidden_act": "silu",
    "max_position_embeddings": 262144,
    "rms_norm_eps": 1e-05,
    # theta 1e6: the slowest of head_dim/2 frequencies has a wavelength (~2.6M) beyond 262144 positions
    "rope_theta": 1000000.0,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
    "attention_bias": False,
    "mlp_bias": False,
    "tie_word_embeddings": True,
    "initializer_range": 0.02,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "pad_token_id": 2,
    "dtype": "float32",
    "use_cache": True,
}


# The long-context sibling: the same tokenizer, chat template and weights, with every layer's attention
# limited to the last SLIDING_WINDOW positions (Mistral-style `sliding_window`; vLLM's Llama reads it per
# layer from `layer_types`, its CPU attention backend and prefix caching both serve it). Prefill then costs
# time linear in the prompt's length, so full-scale W01 prompts (105K-181K tokens) prefill in seconds
# instead of minutes; the front end (what the region cache acts on) sees exactly the same tokenizer.
SWA_MODEL_NAME = "tiny-frank-swa"
SLIDING_WINDOW = 1024
SWA_MODEL_CONFIG: dict[str, Any] = {
    **MODEL_CONFIG,
    "sliding_window": SLIDING_WINDOW,
    "layer_types": ["sliding_attention"] * MODEL_CONFIG["num_hidden_layers"],
}


@dataclass(frozen=True)
class ModelSpec:
    name: str
    build_version: str  # change it whenever that model's bytes change
    config: dict[str, Any]


MODELS = {
    MODEL_NAME: ModelSpec(MODEL_NAME, BUILD_VERSION, MODEL_CONFIG),
    SWA_MODEL_NAME: ModelSpec(SWA_MODEL_NAME, "tiny-frank-swa-1", SWA_MODEL_CONFIG),
}


def spec_for(name: str) -> ModelSpec:
    from frank.errors import FrankError

    try:
        return MODELS[name]
    except KeyError:
        raise FrankError(f"no built-in model {name!r}: expected one of {', '.join(MODELS)}") from None


# ---------------------------------------------------------------- stdlib half (console-safe)


def default_dir(name: str = MODEL_NAME) -> Path:
    from frank import paths

    return paths.models_dir() / spec_for(name).name


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class ModelManifest(TypedDict):
    """A built model's manifest.json: the builder version and every file's sha256 (what `check_build` checks)."""

    builder_version: str
    name: str
    files: dict[str, dict[str, Any]]  # file name -> {sha256, bytes}


def read_manifest(model_dir: Path) -> ModelManifest | None:
    from frank import readfile  # stdlib only (and frank.errors): import-safe wherever this module is
    from frank.errors import FrankError

    try:
        return cast(ModelManifest, readfile.read_object(model_dir / MANIFEST))
    except FrankError:
        return None


def check_build(model_dir: Path, name: str = MODEL_NAME) -> str | None:
    """None if `model_dir` holds a complete build of model `name`'s current build version, else why not."""
    return check_build_version(model_dir, spec_for(name).build_version)


def check_build_version(model_dir: Path, version: str) -> str | None:
    """None if `model_dir` holds a complete build of builder version `version` (every model frank builds)."""
    if not model_dir.exists():
        return f"{model_dir}: not built yet"
    from frank import readfile
    from frank.errors import FrankError

    try:
        manifest = cast(ModelManifest, readfile.read_object(model_dir / MANIFEST))
    except FrankError as exc:
        return str(exc)  # the file and why: missing, not a regular file, not JSON, ...
    if manifest.get("builder_version") != version:
        return f"{model_dir / MANIFEST}: builder_version {manifest.get('builder_version')!r} != {version!r}"
    for name, entry in sorted(manifest.get("files", {}).items()):
        path = model_dir / name
        if not path.is_file():
            return f"{path}: missing"
        if sha256_file(path) != entry.get("sha256"):
            return f"{path}: sha256 differs from the manifest"
    return None


def manifest_digest(model_dir: Path) -> str:
    """One fingerprint of the whole build: the sha256 of its manifest (which lists every file's sha256)."""
    return sha256_file(model_dir / MANIFEST)


def build_via_engine_venv(
    out: Path | None = None,
    force: bool = False,
    python: Path | None = None,
    timeout_s: float = 600,
    name: str = MODEL_NAME,
) -> BuildResult:
    """Build (or confirm) model `name` from the console side: the heavy work runs in the engine venv.
    Raises FrankError if the engine python is missing or the build fails."""
    return run_builder(
        "frank.engine.models.tiny_model", out or default_dir(name), force, python, timeout_s, name,
        spec_for(name).build_version,
    )  # fmt: skip


def run_builder(
    module: str, out: Path, force: bool, python: Path | None, timeout_s: float, name: str, version: str
) -> BuildResult:
    """Run `python -m MODULE build --model NAME --out OUT` in the engine venv unless a current build is there."""
    from frank import paths
    from frank.errors import FrankError

    out = out.expanduser().resolve()
    started = time.monotonic()
    reason = "forced" if force else check_build_version(out, version)
    if reason is None:
        return result(out, name, version, built=False, reason="up to date", build_s=0.0)
    python = python or paths.engine_venv_python()
    if not Path(python).exists():
        raise FrankError(f"engine python {python} not found: run `make setup` (or set FRANK_ENGINE_PYTHON)")
    env = dict(os.environ)
    # Until the project is installed into the engine venv, `engine` comes from this checkout.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(paths.REPO_ROOT), env.get("PYTHONPATH")]))
    cmd = [str(python), "-m", module, "build", "--model", name, "--out", str(out)]
    cmd += ["--force"] if force else []
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise FrankError(f"model build timed out after {timeout_s:.0f} s: {' '.join(cmd)}") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise FrankError(f"model build failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")
    problem = check_build_version(out, version)
    if problem is not None:
        raise FrankError(f"model build finished but the result does not verify: {problem}")
    return result(out, name, version, built=True, reason=reason, build_s=time.monotonic() - started)


@dataclass(frozen=True)
class BuildResult:
    """A model build, or the check that found the build current (`built` False, reason "up to date")."""

    path: str
    model: str
    built: bool
    reason: str  # why it was built (forced, a stale or missing build), or "up to date"
    builder_version: str
    manifest_sha256: str  # the whole build's fingerprint (manifest_digest)
    build_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def result(out: Path, name: str, version: str, built: bool, reason: str, build_s: float) -> BuildResult:
    return BuildResult(str(out), name, built, reason, version, manifest_digest(out), round(build_s, 2))


def _result(out: Path, name: str, built: bool, reason: str, build_s: float) -> BuildResult:
    return result(out, name, spec_for(name).build_version, built, reason, build_s)


# ---------------------------------------------------------------- builder half (engine venv)


def _train_tokenizer(out: Path) -> None:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    from frank.engine.models.tiny_corpus import corpus

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        show_progress=False,
        special_tokens=[AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS]
        + [AddedToken(t, special=False, normalized=False) for t in PLAIN_ADDED_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    # The trainer registers all its special_tokens as special; mark the plain ones plain again.
    for token in PLAIN_ADDED_TOKENS:
        tok.add_tokens([AddedToken(token, special=False, normalized=False)])
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A",
        pair=f"{BOS} $A {BOS} $B",
        special_tokens=[(BOS, tok.token_to_id(BOS))],
    )
    if tok.get_vocab_size() != VOCAB_SIZE:
        raise RuntimeError(f"tokenizer vocab is {tok.get_vocab_size()}, expected {VOCAB_SIZE}")
    tok.save(str(out / "tokenizer.json"), pretty=True)

    ids = {t: tok.token_to_id(t) for t in (BOS, EOS, PAD)}
    added = {
        str(tok.token_to_id(t)): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": t in SPECIAL_TOKENS,
        }
        for t in CONTROL_TOKENS
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "unk_token": None,
        "add_bos_token": True,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": MODEL_CONFIG["max_position_embeddings"],
        "added_tokens_decoder": added,
        "chat_template": CHAT_TEMPLATE,
    }
    write_json(out / "tokenizer_config.json", config)
    write_json(out / "special_tokens_map.json", {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD})
    expected = {BOS: 0, EOS: 1, PAD: 2}
    if ids != expected:
        raise RuntimeError(f"control token ids {ids} != {expected}")


def _write_weights(out: Path, c: dict[str, Any]) -> None:
    import torch

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(SEED)
    hidden, inter, head_dim = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q_out, kv_out = c["num_attention_heads"] * head_dim, c["num_key_value_heads"] * head_dim
    std = c["initializer_range"]

    def normal(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=torch.float32) * std

    tensors = {"model.embed_tokens.weight": normal(c["vocab_size"], hidden)}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        tensors[p + "input_layernorm.weight"] = torch.ones(hidden)
        tensors[p + "self_attn.q_proj.weight"] = normal(q_out, hidden)
        tensors[p + "self_attn.k_proj.weight"] = normal(kv_out, hidden)
        tensors[p + "self_attn.v_proj.weight"] = normal(kv_out, hidden)
        tensors[p + "self_attn.o_proj.weight"] = normal(hidden, q_out)
        tensors[p + "post_attention_layernorm.weight"] = torch.ones(hidden)
        tensors[p + "mlp.gate_proj.weight"] = normal(inter, hidden)
        tensors[p + "mlp.up_proj.weight"] = normal(inter, hidden)
        tensors[p + "mlp.down_proj.weight"] = normal(hidden, inter)
    tensors["model.norm.weight"] = torch.ones(hidden)
    save_safetensors(tensors, out / "model.safetensors")
    write_json(out / "config.json", c)
    write_json(
        out / "generation_config.json",
        {
            "bos_token_id": c["bos_token_id"],
            "eos_token_id": c["eos_token_id"],
            "pad_token_id": c["pad_token_id"],
        },
    )


SAFETENSORS_DTYPES = {
    "float32": "F32",
    "bfloat16": "BF16",
    "int64": "I64",
    "int32": "I32",
    "int8": "I8",
    "uint8": "U8",
    "float8_e8m0fnu": "F8_E8M0",
}


def save_safetensors(tensors: dict[str, Any], path: Path) -> None:
    """Write tensors in the safetensors format ourselves, so the bytes never depend on the library's header
    ordering (the safetensors package writes `__metadata__` from a hash map). Tensors are written one at a
    time after the header (a multi-GB checkpoint is never copied whole)."""
    import torch

    names = sorted(tensors)
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name in names:
        t = tensors[name]
        size = t.numel() * t.element_size()
        header[name] = {
            "dtype": SAFETENSORS_DTYPES[str(t.dtype).removeprefix("torch.")],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    head = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    head += b" " * (-len(head) % 8)  # the data must start 8-byte aligned
    with path.open("wb") as handle:
        handle.write(len(head).to_bytes(8, "little"))
        handle.write(head)
        for name in names:  # little-endian bytes of each tensor, as laid out in memory on x86
            handle.write(tensors[name].detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())


def write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def _write_manifest(out: Path, spec: ModelSpec) -> None:
    write_manifest(out, spec.name, spec.build_version)


def write_manifest(out: Path, name: str, version: str) -> None:
    files = {
        p.name: {"sha256": sha256_file(p), "bytes": p.stat().st_size}
        for p in sorted(out.iterdir())
        if p.is_file() and p.name != MANIFEST
    }
    write_json(out / MANIFEST, ModelManifest(builder_version=version, name=name, files=files))


def build(out: Path, force: bool = False, name: str = MODEL_NAME) -> BuildResult:
    """Build model `name` into `out` (atomically: temp dir + rename). Skips a current build unless `force`."""
    spec = spec_for(name)
    out = out.expanduser().resolve()
    if not force and check_build(out, name) is None:
        return _result(out, name, built=False, reason="up to date", build_s=0.0)
    started = time.monotonic()

    def fill(tmp: Path) -> None:
        _train_tokenizer(tmp)
        _write_weights(tmp, spec.config)
        _write_manifest(tmp, spec)

    build_dir_atomically(out, fill)
    return _result(out, name, built=True, reason="built", build_s=round(time.monotonic() - started, 2))


def build_dir_atomically(out: Path, fill: Callable[[Path], None]) -> None:
    """Fill a temporary sibling of `out`, then swap it in: a reader sees the old model or the new, never half."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.build-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        fill(tmp)
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m frank.engine.models.tiny_model", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the tiny model (engine venv)")
    b.add_argument("--model", default=MODEL_NAME, choices=sorted(MODELS), help="which model (default: %(default)s)")
    b.add_argument("--out", type=Path, default=None, help="target dir (default: models dir/MODEL)")
    b.add_argument("--force", action="store_true", help="rebuild even if a current build is there")
    v = sub.add_parser("verify", help="check a build against its manifest and its build version")
    v.add_argument("--model", default=MODEL_NAME, choices=sorted(MODELS))
    v.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.cmd == "build":
        # One thread everywhere: BPE training and weight init are then the same on every machine.
        os.environ["RAYON_NUM_THREADS"] = "1"
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        print(
            json.dumps(
                build(args.out or default_dir(args.model), force=args.force, name=args.model).to_json(), sort_keys=True
            )
        )
        return 0
    model_dir = (args.dir or default_dir(args.model)).expanduser().resolve()
    problem = check_build(model_dir, args.model)
    print(json.dumps({"path": str(model_dir), "ok": problem is None, "problem": problem}, sort_keys=True))
    return 0 if problem is None else 1


if __name__ == "__main__":
    sys.exit(main())
