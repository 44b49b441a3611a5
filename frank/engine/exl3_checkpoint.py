"""An EXL3 checkpoint's tensor table, read from its safetensors headers and never from its data, and what its
routed experts weigh: the bytes behind the split's fit (frank.engine.split_fit).

Two sources give the same table:
- a checkpoint folder: config.json and every *.safetensors file's header (the 8-byte length, then at most
  MAX_HEADER bytes of JSON; a regular file only, checked first);
- a headers JSON, as scripts/device_exl3.sh writes it on the GPU machine
  (`bench/exl3-checkpoint-headers.json`: {"config": ..., "files": {NAME: header}, "bytes": {NAME: size}}).

A header that is not what safetensors writes (a length past the file, bad JSON, an entry without dtype, shape
or data_offsets, offsets past the data or not the shape's size) is refused naming the file and the tensor.

How exllamav3 1.6.5 names and stores a routed expert (read from its wheel):
- the keys: `{layer}.experts.{e}.w1|w3|w2` (gate, up, down) under `layers.N.ffn` for the trunk and `mtp.N.ffn`
  for the DSpark stage (architecture/deepseek_v4.py:174-188, deepseek_v4_mtp.py:92-101;
  modules/block_sparse_mlp.py:341-380 fills `{expert_idx}`);
- each projection as EXL3 tensors (modules/quant/exl3.py:103-117, written by
  modules/quant/exl3_lib/quantize.py:1854-1866 and 32-41): `.trellis` int16 (in/16, out/16, 16*K) for K bits a
  weight, `.suh` / `.svh` fp16 (in) / (out), an optional `.bias`, and a codebook marker `.mul1` (or `.mcg`),
  an int32 scalar the loader shares as one CPU tensor for the whole model (loader/safetensors.py:638-660);
- a hash-routed layer (the first num_hash_layers) has a `{layer}.gate.tid2eid` table (deepseek_v4.py:188).

What the split moves (modules/block_sparse_mlp_cpu.py): the tail experts' Linears leave the module (:916-925:
never loaded on the GPU), but their small tensors, suh, svh and bias, are fetched onto the GPU as fp16 for the
streamed prefill (:885-896). So an expert on the GPU costs every tensor but its codebook marker; one on the
CPU worker leaves its suh, svh and bias behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import struct
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from frank import readfile
from frank.errors import FrankError

MAX_HEADER = 100_000_000  # safetensors' own limit on a header (its MAX_HEADER_SIZE)
MAX_FILES = 10_000  # *.safetensors files in one checkpoint folder
HEADERS_JSON = readfile.Kind("a checkpoint's headers JSON", 256 * readfile.MiB)
CONFIG = readfile.Kind("a checkpoint's config.json", 4 * readfile.MiB)
DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2,
    "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
}  # fmt: skip
EXPERT = re.compile(r"^(?P<layer>.+)\.experts\.(?P<index>\d+)\.(?P<proj>[^.]+)\.(?P<part>[^.]+)$")
MARKERS = frozenset({"mcg", "mul1"})  # codebook markers: one shared CPU tensor, nothing on the GPU
AUX = frozenset({"suh", "svh", "bias"})  # a CPU expert's tensors that stay on the GPU, as fp16
DRAFT_PREFIX = "mtp."  # DeepSeek-V4's DSpark stage: loaded only as the draft (deepseek_v4.py:101-105)
SKIPPED_PREFIXES = ("vision.",)  # a vision tower the adapter never loads


class CheckpointError(FrankError):
    """A checkpoint (or headers JSON) frank cannot read as EXL3 safetensors; the message names the file."""


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    file: str


@dataclass(frozen=True)
class Projection:
    """One projection of one expert (w1, w2 or w3) and what it stores."""

    parts: dict[str, Tensor]  # suffix (trellis, suh, svh, bias, mul1, ...) -> tensor

    @property
    def gpu_bytes(self) -> int:
        """Resident when the expert is on the GPU: every tensor but the codebook marker."""
        return sum(t.nbytes for p, t in self.parts.items() if p not in MARKERS)

    @property
    def aux_bytes(self) -> int:
        """Resident when the expert is on the CPU worker: suh, svh and bias, fetched as fp16."""
        return sum(_numel(t.shape) * 2 for p, t in self.parts.items() if p in AUX)

    @property
    def mul1(self) -> bool:
        return "mul1" in self.parts

    @property
    def bias(self) -> bool:
        return "bias" in self.parts

    @property
    def rate_ok(self) -> bool:
        """The CPU kernels take the trellis' tile width (block_sparse_mlp_cpu.py:381-390, trellis_rate)."""
        trellis = self.parts.get("trellis")
        if trellis is None or len(trellis.shape) != 3:
            return False
        k, rem = divmod(trellis.shape[-1], 16)
        return (rem == 0 and 1 <= k <= 8) or (rem == 8 and 1 <= k <= 3)


@dataclass(frozen=True)
class Expert:
    projections: dict[str, Projection]  # w1, w2, w3

    @property
    def gpu_bytes(self) -> int:
        return sum(p.gpu_bytes for p in self.projections.values())

    @property
    def aux_bytes(self) -> int:
        return sum(p.aux_bytes for p in self.projections.values())


@dataclass(frozen=True)
class MoeLayer:
    key: str  # "layers.3.ffn", "mtp.0.ffn"
    experts: tuple[Expert, ...]
    hash_routed: bool  # a tid2eid table: its split is always static (block_sparse_mlp_cpu.py:830-831)
    draft: bool  # under mtp.: loaded only with the DSpark draft

    @cached_property
    def _gpu_prefix(self) -> list[int]:
        out = [0]
        for expert in self.experts:
            out.append(out[-1] + expert.gpu_bytes)
        return out

    @cached_property
    def _aux_prefix(self) -> list[int]:
        out = [0]
        for expert in self.experts:
            out.append(out[-1] + expert.aux_bytes)
        return out

    def gpu_bytes(self, first: int, worker_first: int) -> int:
        """GPU-resident bytes with experts [0, first) on the GPU and [worker_first, E) on the CPU worker."""
        n = len(self.experts)
        return self._gpu_prefix[first] + self._aux_prefix[n] - self._aux_prefix[worker_first]

    def cpu_bytes(self, worker_first: int) -> int:
        """What the CPU worker holds: the experts [worker_first, E), whole."""
        return self._gpu_prefix[len(self.experts)] - self._gpu_prefix[worker_first]

    def refusal(self, first: int) -> str | None:
        """Why exllamav3 would skip the split of this layer at `first` (load_cpu_split's probes,
        block_sparse_mlp_cpu.py:793-815), or None: the probed expert's projections carry the mul1 codebook and a
        tile width the CPU kernels take, and each projection's bias is on all tail experts or on none."""
        probe = self.experts[first].projections.values()
        if not all(p.mul1 for p in probe):
            return "experts are not mul1"
        if not all(p.rate_ok for p in probe):
            return "unsupported bitrate"
        for name in self.experts[first].projections:
            has = [e.projections[name].bias for e in self.experts[first:] if name in e.projections]
            if any(has) and not all(has):
                return "mixed expert biases"
        return None


@dataclass(frozen=True)
class Checkpoint:
    source: str  # the folder or headers JSON read
    config: dict[str, Any]
    tensors: dict[str, Tensor]
    file_bytes: dict[str, int] = field(default_factory=dict)

    @cached_property
    def fingerprint(self) -> str:
        """The tensor table's hash (names, dtypes, shapes): the same from the folder and its headers JSON."""
        digest = hashlib.sha256()
        for name in sorted(self.tensors):
            t = self.tensors[name]
            digest.update(f"{name}\0{t.dtype}\0{','.join(map(str, t.shape))}\n".encode())
        return digest.hexdigest()[:16]

    @cached_property
    def moe_layers(self) -> tuple[MoeLayer, ...]:
        """Every layer with routed experts, in exllamav3's load order (the trunk, then the draft)."""
        grouped: dict[str, dict[int, dict[str, dict[str, Tensor]]]] = {}
        for name, tensor in self.tensors.items():
            m = EXPERT.match(name)
            if m is None or name.startswith(SKIPPED_PREFIXES):
                continue
            experts = grouped.setdefault(m["layer"], {})
            experts.setdefault(int(m["index"]), {}).setdefault(m["proj"], {})[m["part"]] = tensor
        layers = []
        for key, experts in grouped.items():
            count = max(experts) + 1
            if sorted(experts) != list(range(count)):
                missing = sorted(set(range(count)) - set(experts))[:5]
                raise CheckpointError(f"{self.source}: {key}: experts {missing} of 0..{count - 1} have no tensors")
            layers.append(
                MoeLayer(
                    key=key,
                    experts=tuple(
                        Expert({p: Projection(parts) for p, parts in sorted(experts[i].items())}) for i in range(count)
                    ),
                    hash_routed=f"{key}.gate.tid2eid" in self.tensors,
                    draft=key.startswith(DRAFT_PREFIX),
                )
            )
        return tuple(sorted(layers, key=_load_order))

    def other_bytes(self, draft: bool) -> int:
        """GPU-resident bytes of every tensor but the routed experts and the codebook markers, of the trunk and
        (with the draft) the DSpark stage."""
        total = 0
        for name, tensor in self.tensors.items():
            if EXPERT.match(name) or name.startswith(SKIPPED_PREFIXES) or name.rsplit(".", 1)[-1] in MARKERS:
                continue
            if name.startswith(DRAFT_PREFIX) and not draft:
                continue
            total += tensor.nbytes
        return total

    def config_int(self, key: str) -> int | None:
        value = self.config.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None


def _load_order(layer: MoeLayer) -> tuple[bool, int, str]:
    number = re.search(r"\.(\d+)\.", f".{layer.key}.")
    return (layer.draft, int(number.group(1)) if number else 0, layer.key)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# -- reading ------------------------------------------------------------------------------------------


def read_checkpoint(path: Path | str) -> Checkpoint:
    """The tensor table of a checkpoint folder, or of a headers JSON (a file ending in .json)."""
    path = Path(path)
    if path.is_dir():
        return _read_folder(path)
    if path.suffix == ".json":
        return _read_headers_json(path)
    if not path.exists():
        raise CheckpointError(f"{path}: no such checkpoint (a folder of EXL3 safetensors, or a headers JSON)")
    raise CheckpointError(f"{path}: not a checkpoint folder or a headers JSON (*.json)")


def _read_folder(folder: Path) -> Checkpoint:
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{folder}: no *.safetensors files (is it exllamav3's converter's output?)")
    if len(files) > MAX_FILES:
        raise CheckpointError(f"{folder}: {len(files)} safetensors files; frank reads at most {MAX_FILES}")
    config_path = folder / "config.json"
    config = readfile.read_object(config_path, CONFIG, CheckpointError) if config_path.exists() else {}
    tensors: dict[str, Tensor] = {}
    sizes: dict[str, int] = {}
    for file in files:
        header, size = read_header(file)
        sizes[file.name] = size
        _add(tensors, header, file, file.name, size)
    return Checkpoint(str(folder), config, tensors, sizes)


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """A safetensors file's header (its JSON object) and the file's size, reading no tensor data."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CheckpointError(f"{path}: not a regular file")
        head = os.pread(fd, 8, 0)
        if len(head) < 8:
            raise CheckpointError(f"{path}: not a safetensors file: {st.st_size} bytes, shorter than its 8-byte length")
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER:
            raise CheckpointError(
                f"{path}: not a safetensors file frank reads: a {length}-byte header (at most {MAX_HEADER})"
            )
        if 8 + length > st.st_size:
            raise CheckpointError(
                f"{path}: truncated: its header says {length} bytes, the file has {st.st_size - 8} after the length"
            )
        data = os.pread(fd, length, 8)
        if len(data) != length:
            raise CheckpointError(f"{path}: truncated while read: {len(data)} of {length} header bytes")
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        header = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CheckpointError(f"{path}: not a safetensors file: its header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: not a safetensors file: its header is not a JSON object")
    return header, st.st_size - 8 - length


def _read_headers_json(path: Path) -> Checkpoint:
    data = readfile.read_object(path, HEADERS_JSON, CheckpointError)
    files, sizes, config = data.get("files"), data.get("bytes", {}), data.get("config", {})
    if not isinstance(files, dict) or not files:
        raise CheckpointError(f"{path}: files: expected an object of safetensors headers by file name")
    if not isinstance(sizes, dict) or not isinstance(config, dict):
        raise CheckpointError(f"{path}: bytes and config: expected objects")
    tensors: dict[str, Tensor] = {}
    for name, header in files.items():
        if not isinstance(header, dict):
            raise CheckpointError(f"{path}: files.{name}: expected a safetensors header (an object)")
        size = sizes.get(name)
        _add(tensors, header, path, name, size if isinstance(size, int) else None)
    return Checkpoint(str(path), config, tensors, {k: v for k, v in sizes.items() if isinstance(v, int)})


def _add(tensors: dict[str, Tensor], header: dict[str, Any], where: Path, file: str, data_len: int | None) -> None:
    """Each entry of one file's header as a Tensor, checked as safetensors writes it."""
    label = str(where) if where.name == file else f"{where}: files.{file}"
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict):
            raise CheckpointError(f"{label}: {name}: expected an object with dtype, shape and data_offsets")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if dtype not in DTYPE_BYTES:
            raise CheckpointError(f"{label}: {name}: dtype {dtype!r} is not one safetensors writes")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise CheckpointError(f"{label}: {name}: shape {shape!r} is not a list of sizes")
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]
        ):
            raise CheckpointError(f"{label}: {name}: data_offsets {offsets!r} is not [begin, end]")
        nbytes = _numel(tuple(shape)) * DTYPE_BYTES[dtype]
        if offsets[1] - offsets[0] != nbytes:
            raise CheckpointError(
                f"{label}: {name}: data_offsets span {offsets[1] - offsets[0]} bytes, its {dtype} shape {shape} "
                f"is {nbytes}"
            )
        if data_len is not None and offsets[1] > data_len:
            raise CheckpointError(f"{label}: {name}: data ends at byte {offsets[1]}, past the file's {data_len}")
        if name in tensors:
            raise CheckpointError(f"{label}: {name}: also in {tensors[name].file}")
        tensors[name] = Tensor(name, dtype, tuple(shape), nbytes, file)
