"""llama.cpp's own converter (convert_hf_to_gguf.py, its conversion/ package and gguf-py) from the source that
scripts/pack_llamacpp_source.sh unpacks, so every GGUF frank makes matches the llama.cpp built from it.

The converter names a BPE tokenizer's pre-tokenizer by hashing how it splits a fixed text and knows only
published tokenizers; the tiny tokenizer is trained here (byte-level BPE, GPT-2's split pattern), so its hash
is unknown: we declare "gpt-2" for it instead of editing the converter's hash table. Engine venv only
(torch, transformers, numpy); stdlib at import.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

LLAMACPP_VERSION = "0.3.36"  # llama-cpp-python's sdist, as in scripts/pack_llamacpp_source.sh
REPO = Path(__file__).resolve().parents[3]
SOURCE_ENV = "FRANK_LLAMACPP_SRC"
PRE_TOKENIZER = "gpt-2"


def source_dir() -> Path:
    override = os.environ.get(SOURCE_ENV)
    if override:
        return Path(override)
    return REPO / ".device" / "src" / f"llama_cpp_python-{LLAMACPP_VERSION}" / "vendor" / "llama.cpp"


def check_source(src: Path | None = None) -> str | None:
    """None if `src` (default: source_dir()) holds the converter, else what to run."""
    src = src or source_dir()
    if (src / "convert_hf_to_gguf.py").is_file() and (src / "conversion" / "deepseek.py").is_file():
        return None
    return f"{src}: no llama.cpp converter here: run `make llamacpp-src` (scripts/pack_llamacpp_source.sh)"


def load_converter(src: Path | None = None) -> Any:  # the converter module, loaded from its file
    """Import convert_hf_to_gguf.py from `src` with its gguf-py, and declare the tiny tokenizer's split."""
    src = (src or source_dir()).resolve()
    problem = check_source(src)
    if problem:
        raise SystemExit(problem)
    sys.path[:0] = [str(src), str(src / "gguf-py")]
    os.environ.pop("NO_LOCAL_GGUF", None)  # the gguf-py of this source, not whatever the venv has
    import convert_hf_to_gguf
    from conversion.base import TextModel

    TextModel.get_vocab_base_pre = lambda self, tokenizer: PRE_TOKENIZER
    return convert_hf_to_gguf


def convert(model_dir: Path, out: Path, *extra: str, src: Path | None = None) -> None:
    """Convert `model_dir` to the GGUF `out` in a child process (the converter keeps state in its classes and
    the logging module; a fresh interpreter per file keeps two conversions apart). Raises on failure."""
    code = (
        "import sys; from frank.engine.models import llamacpp_convert as c; "
        "m = c.load_converter(); sys.argv = ['convert_hf_to_gguf.py'] + sys.argv[1:]; m.main()"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    if src:
        env[SOURCE_ENV] = str(src)
    cmd = [sys.executable, "-c", code, str(model_dir), "--outfile", str(out), *extra]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not out.is_file():
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-25:])
        raise RuntimeError(f"llama.cpp's converter failed on {model_dir} (exit {proc.returncode}):\n{tail}")
