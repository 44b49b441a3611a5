"""Convert the tiny model (`frank model build`) to a GGUF that llama.cpp serves: about 2.9 MB in float32,
small enough to carry to the GPU device in one call.

Uses llama.cpp's own converter (convert_hf_to_gguf.py with its conversion/ package and gguf-py) from the
source that scripts/pack_llamacpp_source.sh unpacks, so the GGUF matches the server built from that source.
Run it in the engine venv (the converter needs torch, transformers and numpy):

    scripts/pack_llamacpp_source.sh
    .venv-engine/bin/python scripts/make_tiny_gguf.py [--model DIR] [--out FILE]

The converter names a BPE tokenizer's pre-tokenizer by hashing how it splits a fixed text and knows only
published tokenizers; the tiny tokenizer is trained here (byte-level BPE, GPT-2's split pattern), so its
hash is unknown. We declare "gpt-2" for it instead of editing the converter's hash table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from frank.engine.models import llamacpp_convert  # noqa: E402  (the checkout, not an installed frank)

LLAMACPP_VERSION = llamacpp_convert.LLAMACPP_VERSION
DEFAULT_SRC = llamacpp_convert.source_dir()
PRE_TOKENIZER = llamacpp_convert.PRE_TOKENIZER


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", type=Path, default=DEFAULT_SRC, help="llama.cpp source tree (default: %(default)s)")
    p.add_argument(
        "--model",
        type=Path,
        default=None,
        help="tiny model folder (default: $FRANK_MODELS/tiny-frank, else .build/models/tiny-frank)",
    )
    p.add_argument("--out", type=Path, default=REPO / ".device" / "tiny-frank.gguf", help="default: %(default)s")
    p.add_argument("--outtype", default="f32", choices=["f32", "f16", "bf16"], help="default: %(default)s")
    return p.parse_args(argv)


def default_model() -> Path:
    """$FRANK_MODELS/tiny-frank, else the test tier's (`make test-model`): the engine venv may lack platformdirs."""
    models = os.environ.get("FRANK_MODELS")
    return (Path(models).expanduser() if models else REPO / ".build" / "models") / "tiny-frank"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model = (args.model or default_model()).resolve()
    if not (model / "config.json").is_file():
        raise SystemExit(f"{model}: no config.json (build the tiny model first: frank model build)")
    converter = llamacpp_convert.load_converter(args.src)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    sys.argv = ["convert_hf_to_gguf.py", str(model), "--outfile", str(args.out), "--outtype", args.outtype]
    converter.main()
    print(
        json.dumps(
            {
                "gguf": str(args.out),
                "bytes": args.out.stat().st_size,
                "sha256": sha256(args.out),
                "model": str(model),
                "model_safetensors_sha256": sha256(model / "model.safetensors"),
                "llamacpp_source": f"llama-cpp-python {LLAMACPP_VERSION} vendor/llama.cpp",
                "pre_tokenizer": PRE_TOKENIZER,
                "outtype": args.outtype,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
