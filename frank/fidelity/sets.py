"""Fidelity text sets (docs/fidelity.md): a folder with a TOML manifest and one JSONL file of documents.

    my-set/
      set.toml        format = "frank-fidelity-set", format_version, name, description, file, sha256,
                      documents, max_tokens, [meta]
      texts.jsonl     one {"id": ..., "text": ...} per line

The shipped sets (code, agent, prose, and short: a few documents of each, for engines that score one
position per request) live in frank/fidelity/sets/ and are made by
frank/fidelity/make_sets.py (deterministic; `make_sets.py --check` proves the shipped bytes). User sets
go in `<data>/fidelity-sets/` or are named by path. `check_set` reports every problem as `file:line: reason`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, field_validator

from frank import paths, readfile, tomlfile
from frank.errors import FrankError
from frank.workloads.format import (  # one definition
    CheckError,
    Manifest,
    check_manifest,
    file_field,
    format_errors,
    iter_jsonl,
    jsonl_lines,
    read_checked,
    read_toml,
    sha256_field,
)

FORMAT = "frank-fidelity-set"
FORMAT_VERSION = 1
MANIFEST = "set.toml"
SHIPPED_DIR = Path(__file__).resolve().parent / "sets"
DEFAULT_SETS = ("code", "agent", "prose")  # what a run or a [fidelity] table measures when it names none
SHIPPED = DEFAULT_SETS + ("short",)  # short: ~200 positions, for engines that score one position a request
MAX_TOKENS_LIMIT = 32768  # per document: the reference keeps [tokens, vocab] float64 logits in memory


@dataclass(frozen=True)
class Document:
    id: str
    text: str


@dataclass(frozen=True)
class TextSet:
    path: Path
    name: str
    description: str
    file: str
    sha256: str  # of the texts file's bytes: the set's identity in caches and reports
    max_tokens: int  # each document is cut to its first max_tokens tokens (BOS included)
    documents: tuple[Document, ...] = field(default=(), repr=False)
    meta: Mapping[str, Any] = field(default_factory=dict)


class _SetManifest(Manifest):
    FORMAT: ClassVar[str] = FORMAT
    FORMAT_VERSION: ClassVar[int] = FORMAT_VERSION
    file: str
    sha256: str
    documents: int | None = Field(None, ge=1)
    max_tokens: int
    meta: dict[str, Any] = Field(default_factory=dict)

    _file = field_validator("file")(file_field)
    _sha256 = field_validator("sha256")(sha256_field)

    @field_validator("max_tokens")
    @classmethod
    def _max_tokens(cls, value: int) -> int:
        if not 2 <= value <= MAX_TOKENS_LIMIT:
            raise ValueError(f"expected an integer from 2 to {MAX_TOKENS_LIMIT}, got {value!r}")
        return value


def check_set(path: Path | str) -> tuple[TextSet | None, list[CheckError]]:
    """Check a set folder; returns the loaded set (None on any error) and every error found."""
    path = Path(path).expanduser()
    mpath = path / MANIFEST
    if not path.is_dir():
        return None, [CheckError(path, 0, "not a fidelity set folder (no such directory)")]
    if not mpath.exists():
        return None, [CheckError(mpath, 0, f"missing manifest (every set folder has a {MANIFEST})")]
    manifest, errors = check_manifest(_SetManifest, mpath)
    if manifest is None:
        return None, errors
    file, sha, count = manifest.file, manifest.sha256, manifest.documents
    lines = tomlfile.KeyLines(read_toml(mpath)[0])

    def err(key: str, reason: str) -> None:
        errors.append(CheckError(mpath, lines.line(key) or 1, reason))

    documents: list[Document] = []
    fpath = path / file
    if not fpath.exists():
        err("file", f"file: {file} is missing")
        return None, errors
    raw = read_checked(fpath, readfile.JSONL, errors)
    if raw is None:
        return None, errors
    digest = hashlib.sha256(raw).hexdigest()
    if digest != sha:
        err("sha256", f"sha256 mismatch: {file} has {digest}, the manifest says {sha}")
    documents, doc_errors = _parse_documents(fpath, raw)
    errors.extend(doc_errors)
    if count is not None and not doc_errors and count != len(documents):
        err("documents", f"documents: the manifest says {count}, {file} has {len(documents)}")
    if errors:
        return None, errors
    return TextSet(
        path, manifest.name, manifest.description, file, sha, manifest.max_tokens, tuple(documents), manifest.meta
    ), []


def _parse_documents(fpath: Path, raw: bytes) -> tuple[list[Document], list[CheckError]]:
    errors: list[CheckError] = []
    documents: list[Document] = []
    seen: dict[str, int] = {}
    lines = jsonl_lines(raw)
    if not lines:
        errors.append(CheckError(fpath, 1, "no documents"))
    for n, obj in iter_jsonl(fpath, lines, errors):
        if not isinstance(obj, dict):
            errors.append(CheckError(fpath, n, "expected a JSON object with 'id' and 'text'"))
            continue
        doc_id, text = obj.get("id"), obj.get("text")
        if not isinstance(doc_id, str) or not doc_id:
            errors.append(CheckError(fpath, n, f"field 'id': expected a non-empty string, got {doc_id!r}"))
        elif doc_id in seen:
            errors.append(CheckError(fpath, n, f"duplicate id {doc_id!r} (first at line {seen[doc_id]})"))
        if not isinstance(text, str) or not text.strip():
            errors.append(CheckError(fpath, n, "field 'text': expected a non-empty string"))
        if isinstance(doc_id, str) and doc_id and doc_id not in seen and isinstance(text, str) and text.strip():
            seen[doc_id] = n
            documents.append(Document(doc_id, text))
    return documents, errors


def load_set(path: Path | str) -> TextSet:
    text_set, errors = check_set(path)
    if text_set is None:
        raise FrankError(f"fidelity set {path} has {len(errors)} error(s):\n" + format_errors(errors, 20))
    return text_set


def user_sets_dir() -> Path:
    return paths.data_dir() / "fidelity-sets"


def resolve_set(spec: str | Path) -> Path:
    """A set folder from a path, a shipped name (code, agent, prose, short) or a folder in the user sets dir."""
    path = Path(spec).expanduser()
    if (path / MANIFEST).is_file():
        return path
    if str(spec) in SHIPPED:
        return SHIPPED_DIR / str(spec)
    candidate = user_sets_dir() / str(spec)
    if (candidate / MANIFEST).is_file():
        return candidate
    raise FrankError(
        f"no fidelity set {spec!r}: not a set folder, not shipped ({', '.join(SHIPPED)}) and not in "
        f"{user_sets_dir()} (see `frank fidelity sets list`)"
    )


def list_sets() -> list[tuple[str, Path, str]]:
    """(name, path, source) for the shipped sets and every set folder in the user sets dir."""
    out = [(name, SHIPPED_DIR / name, "shipped") for name in SHIPPED]
    root = user_sets_dir()
    if root.is_dir():
        out += [(p.name, p, "user") for p in sorted(root.iterdir()) if (p / MANIFEST).is_file()]
    return out


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)


def write_set(
    path: Path | str,
    name: str,
    description: str,
    documents: Iterable[Document],
    max_tokens: int,
    meta: Mapping[str, Any] | None = None,
    file: str = "texts.jsonl",
) -> Path:
    """Write a set folder (texts first, manifest last). Same documents, same bytes."""
    path = Path(path).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    docs = list(documents)
    data = b"".join((json.dumps({"id": d.id, "text": d.text}, ensure_ascii=False) + "\n").encode() for d in docs)
    (path / file).write_bytes(data)
    lines = [
        f"format = {_toml(FORMAT)}",
        f"format_version = {FORMAT_VERSION}",
        f"name = {_toml(name)}",
        f"description = {_toml(description)}",
        f"file = {_toml(file)}",
        f"sha256 = {_toml(hashlib.sha256(data).hexdigest())}",
        f"documents = {len(docs)}",
        f"max_tokens = {max_tokens}",
        "",
    ]
    if meta:
        lines += ["[meta]"] + [f"{k} = {_toml(v)}" for k, v in meta.items()] + [""]
    (path / MANIFEST).write_text("\n".join(lines), encoding="utf-8")
    return path
