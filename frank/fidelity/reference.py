"""The reference side, from the console: run frank/fidelity/reference_model.py in the engine venv and cache its
top-k under (model fingerprint, set sha256, k, threads) in `<data>/fidelity/references/`.

A cached reference is an .npz (frank/fidelity/reference_model.py describes its arrays); its `sha256` (what runs
report as `reference_sha256`) is the hash of the arrays' bytes, so it names exactly what was compared.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from frank import paths, readfile
from frank.errors import FrankError
from frank.fidelity.measure import TOP_K
from frank.fidelity.sets import TextSet

THREADS = 1  # the reference run
FLOOR_THREADS = 2  # its twin for the reference floor: same code, another reduction order
_HASH_WHOLE_BELOW = 64 << 20
_SMALL = readfile.Kind("a model file hashed whole", _HASH_WHOLE_BELOW)


@dataclass(frozen=True)
class Reference:
    set_name: str
    set_sha256: str
    model_sha256: str
    threads: int
    path: Path
    token_ids: np.ndarray  # int64 [T]
    doc_offsets: np.ndarray  # int64 [D+1]
    top_ids: np.ndarray  # int32 [P, k]
    top_logprobs: np.ndarray  # float64 [P, k]
    sha256: str

    def documents(self) -> list[list[int]]:
        return [self.token_ids[a:b].tolist() for a, b in zip(self.doc_offsets[:-1], self.doc_offsets[1:])]

    @property
    def positions(self) -> int:
        return int(self.top_ids.shape[0])


def model_fingerprint(model_dir: Path | str) -> str:
    """The model's identity: the sha256 of its manifest.json when it has one (the tiny model's lists every
    file's sha256), else of a listing of its files (small files by content, big weight files by name and
    size: hashing 100 GB per run is not an option)."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise FrankError(f"the fidelity reference needs a local model folder; {model_dir} is not one")
    manifest = model_dir / "manifest.json"
    if manifest.is_file():
        return hashlib.sha256(readfile.read_bytes(manifest, readfile.JSON)).hexdigest()
    digest = hashlib.sha256()
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        size = path.stat().st_size
        small = size < _HASH_WHOLE_BELOW
        content = hashlib.sha256(readfile.read_bytes(path, _SMALL)).hexdigest() if small else f"size:{size}"
        digest.update(f"{path.relative_to(model_dir)}\0{content}\n".encode())
    return digest.hexdigest()


def check_positions(text_set: TextSet, model_dir: Path | str) -> None:
    """A set's documents must fit the model's position count (the tiny model has 262,144)."""
    try:
        config = readfile.read_object(Path(model_dir) / "config.json")
    except FrankError:
        return
    limit = config.get("max_position_embeddings")
    if isinstance(limit, int) and text_set.max_tokens > limit:
        raise FrankError(
            f"{text_set.path / 'set.toml'}: max_tokens: {text_set.max_tokens} is more than the model's "
            f"{limit} positions"
        )


def references_dir() -> Path:
    return paths.private_dir(paths.data_dir() / "fidelity" / "references")


def _arrays_sha256(arrays: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for name in ("token_ids", "doc_offsets", "top_ids", "top_logprobs"):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}:{array.dtype.str}:{array.shape}\n".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _load(path: Path, text_set: TextSet, model_sha: str, threads: int) -> Reference:
    with np.load(path) as data:
        arrays = {name: data[name] for name in ("token_ids", "doc_offsets", "top_ids", "top_logprobs")}
    return Reference(text_set.name, text_set.sha256, model_sha, threads, path, sha256=_arrays_sha256(arrays), **arrays)


def cached_path(text_set: TextSet, model_sha: str, threads: int = THREADS, k: int = TOP_K) -> Path:
    return references_dir() / model_sha[:16] / f"{text_set.sha256[:16]}-k{k}-t{threads}-m{text_set.max_tokens}.npz"


def get_reference(
    text_set: TextSet,
    model_dir: Path | str,
    python: Path | str,
    *,
    threads: int = THREADS,
    k: int = TOP_K,
    model_sha: str | None = None,
    timeout_s: float = 1800,
) -> Reference:
    """The cached reference for (model, set, k, threads), computed in the engine venv on first use."""
    model_sha = model_sha or model_fingerprint(model_dir)
    check_positions(text_set, model_dir)
    path = cached_path(text_set, model_sha, threads, k)
    if path.is_file():
        return _load(path, text_set, model_sha, threads)
    paths.private_dir(path.parent)
    spec = {
        "model": str(model_dir),
        "documents": [{"id": d.id, "text": d.text} for d in text_set.documents],
        "max_tokens": text_set.max_tokens,
        "top_k": k,
        "threads": threads,
        "out": str(path),
    }
    fd, spec_path = tempfile.mkstemp(prefix="fidelity-ref-", suffix=".json", dir=path.parent)
    with os.fdopen(fd, "w") as handle:
        json.dump(spec, handle)
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(paths.REPO_ROOT), env.get("PYTHONPATH")]))
    cmd = [str(python), "-m", "frank.fidelity.reference_model", spec_path]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise FrankError(f"the fidelity reference for set {text_set.name!r} took more than {timeout_s:.0f} s") from None
    except OSError as exc:
        raise FrankError(f"cannot run the reference with {python}: {exc.strerror}") from None
    finally:
        os.unlink(spec_path)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-12:])
        raise FrankError(f"the fidelity reference failed for set {text_set.name!r} (exit {proc.returncode}):\n{tail}")
    return _load(path, text_set, model_sha, threads)
