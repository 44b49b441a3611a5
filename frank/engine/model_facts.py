"""What a model file says about itself, read without loading it: the context it was trained for (a GGUF's
`ARCH.context_length`, a Hugging Face checkpoint's `max_position_embeddings`), a GGUF's layer count (for the
CPU-expert layers balanced over GPUs, frank.engine.multi_gpu), and a fingerprint of the files that define it
(for the fidelity rule's same-model check).

`check_context` refuses a launch whose context is beyond the trained length unless the command line asks
for RoPE scaling (llama.cpp's --rope-scaling/--rope-scale/--yarn-orig-ctx, vLLM's --hf-overrides with
rope_scaling): llama.cpp serves such a context without a word.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from typing import Any, BinaryIO

from frank import readfile
from frank.engine.profiles import Profile, ProfileError
from frank.errors import FrankError

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
ROPE_FLAGS = ("--rope-scaling", "--rope-scale", "--yarn-orig-ctx", "--rope-freq-scale")
MAX_KEYS = 10_000


def gguf_context_length(path: Path) -> int | None:
    """`ARCH.context_length` of a GGUF file's metadata, or None (not a GGUF, or no such key)."""
    return gguf_arch_int(path, "context_length")


def gguf_block_count(path: Path) -> int | None:
    """`ARCH.block_count` (the repeating layers) of a GGUF file's metadata, or None."""
    return gguf_arch_int(path, "block_count")


def gguf_arch_int(path: Path, key_name: str) -> int | None:
    """The integer `ARCH.<key_name>` of a GGUF file's metadata (ARCH its general.architecture), or None."""
    suffix = "." + key_name
    if not Path(path).is_file():  # a regular file only: a FIFO or a device would block or never end
        return None
    try:
        with open(path, "rb") as f:  # the header only: at most MAX_KEYS keys
            if f.read(4) != b"GGUF":
                return None
            _version, _tensors, count = struct.unpack("<IQQ", f.read(20))
            arch, found = None, {}
            for _ in range(min(count, MAX_KEYS)):
                (size,) = struct.unpack("<Q", f.read(8))
                key = f.read(size).decode("utf-8", "replace")
                (kind,) = struct.unpack("<I", f.read(4))
                value = _read_value(f, kind, key.endswith(suffix) or key == "general.architecture")
                if key == "general.architecture":
                    arch = value
                elif key.endswith(suffix) and isinstance(value, int):
                    found[key.removesuffix(suffix)] = value
                if arch and arch in found:
                    return found[arch]
    except (OSError, struct.error, ValueError):
        return None
    return found.get(arch) if arch else None


def _read_value(f: BinaryIO, kind: int, keep: bool) -> Any:  # a GGUF value: int, float, bool, str or None
    if kind in _SCALARS:
        fmt = "<" + _SCALARS[kind]
        (value,) = struct.unpack(fmt, f.read(struct.calcsize(fmt)))
        return value
    if kind == 8:
        (size,) = struct.unpack("<Q", f.read(8))
        if not keep:
            f.seek(size, 1)
            return None
        return f.read(size).decode("utf-8", "replace")
    if kind == 9:
        elem, count = struct.unpack("<IQ", f.read(12))
        if elem in _SCALARS:
            f.seek(struct.calcsize("<" + _SCALARS[elem]) * count, 1)
        else:
            for _ in range(count):
                _read_value(f, elem, False)
        return None
    raise ValueError(f"unknown GGUF value type {kind}")


def trained_context(model: Path) -> tuple[int, str] | None:
    """(trained context in tokens, where it was read), or None when the model does not say."""
    if model.is_file():
        found = gguf_context_length(model)
        return (found, "the GGUF's context_length") if found else None
    config = model / "config.json"
    try:
        value = readfile.read_object(config).get("max_position_embeddings")
    except FrankError:
        return None
    return (value, "config.json's max_position_embeddings") if isinstance(value, int) and value > 0 else None


def check_context(profile: Profile, argv: list[str], context_flag: str, field: str) -> None:
    """Refuse a context beyond the model's trained length unless the command line asks for RoPE scaling."""
    if context_flag not in argv:
        return
    try:
        asked = int(argv[argv.index(context_flag) + 1])
    except (IndexError, ValueError):
        return
    trained = trained_context(Path(profile.model_path()))
    rope = any(a.split("=", 1)[0] in ROPE_FLAGS for a in argv) or any("rope_scaling" in a for a in argv)
    if trained and asked > trained[0] and not rope:
        raise ProfileError(
            f"{profile.source}: {field}: a context of {asked} tokens is beyond the {trained[0]} the model was "
            f"trained for ({trained[1]}); ask for RoPE scaling (a knob's with_args, e.g. --rope-scaling yarn) "
            f"or serve at most {trained[0]}"
        )


def fingerprint(folder: Path) -> str | None:
    """SHA-256 over the files that define a Hugging Face checkpoint (config, tokenizer, the weights' names
    and sizes), or None when the folder is not here. Two profiles serve the same model when it matches."""
    config = folder / "config.json"
    if not config.is_file():
        return None
    digest = hashlib.sha256()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        path = folder / name
        if path.is_file():
            digest.update(name.encode() + b"\0" + hashlib.sha256(readfile.read_bytes(path, readfile.JSON)).digest())
    for path in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")):
        digest.update(f"{path.name}\0{path.stat().st_size}\0".encode())
    return digest.hexdigest()
