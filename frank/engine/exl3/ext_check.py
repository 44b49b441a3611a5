"""exllamav3's compiled extension checked before it is used: one with libstdc++ linked in statically is refused.

Why (docs/exl3.md, "The crash and its cause"): the GPU machine's image sets CXX/CC/CUDAHOSTCXX to a compiler
under /opt/gcc that links libstdc++ into the extension statically. torch has already loaded the system's
libstdc++.so.6, so two copies of libstdc++'s iostreams meet in one process, and the extension's first
`std::ifstream >> int` (physical_core_order(), which the CPU pool's pinning calls too) crashes with SIGSEGV, or on
another machine misreads. Such an extension NEEDs no libstdc++.so.6, yet exports libstdc++'s own iostream and
locale symbols; one built by the system's g++ NEEDs it and exports none of them.

The ELF file is read here with the standard library (the adapter's python has only exllamav3's dependencies):
its dynamic section's NEEDED entries and its defined dynamic symbols.

    python -m frank.engine.exl3.ext_check [PATH]    (no PATH: the extension exllamav3 would import; exit 1: refused)
"""

from __future__ import annotations

import importlib.util
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

EXTENSION = "exllamav3_ext"
LIBSTDCXX = "libstdc++.so.6"
FIX = (
    "rebuild it with the system compiler: CXX=/usr/bin/g++ CC=/usr/bin/gcc CUDAHOSTCXX=/usr/bin/g++ and an empty "
    "TORCH_EXTENSIONS_DIR (scripts/device_exl3.sh does), or carry one built by `make exl3-ext`"
)
# libstdc++'s own iostream and locale classes, mangled: std::codecvt, std::basic_istream and std::istream (Si).
# An extension linked against the shared libstdc++ takes these from it and defines none.
_RUNTIME_MARKERS = ("codecvt", "basic_istream")
_RUNTIME_PREFIXES = ("_ZNSi", "_ZNKSi", "_ZTVSi", "_ZTISi", "_ZTSSi")

SHT_DYNSYM, SHT_DYNAMIC, DT_NEEDED, SHN_UNDEF = 11, 6, 1, 0


class ExtensionCheckError(Exception):
    """The extension cannot be used, or cannot be read as a shared object; the message says why and the fix."""


@dataclass(frozen=True)
class Linkage:
    path: str
    needed: tuple[str, ...]  # DT_NEEDED: the shared libraries it links
    runtime_symbols: int  # libstdc++'s own iostream/locale symbols it defines

    @property
    def static_libstdcxx(self) -> bool:
        return LIBSTDCXX not in self.needed and self.runtime_symbols > 0

    def describe(self) -> str:
        how = "links libstdc++.so.6" if LIBSTDCXX in self.needed else "does not link libstdc++.so.6"
        return f"{self.path}: {how}; defines {self.runtime_symbols} of libstdc++'s iostream/locale symbols"


def _sections(data: bytes) -> list[tuple[int, int, int, int, int]]:
    """(type, offset, size, link, entsize) of every section of a 64-bit little-endian ELF file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("no 64-bit little-endian ELF header")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    out = []
    for i in range(shnum):
        base = shoff + i * shentsize
        _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, base
        )
        out.append((kind, offset, size, link, entsize))
    return out


def _string(data: bytes, table_offset: int, index: int) -> str:
    end = data.index(b"\0", table_offset + index)
    return data[table_offset + index : end].decode("utf-8", "replace")


def linkage(path: str | Path) -> Linkage:
    """What the shared object links and which of libstdc++'s own symbols it defines (ExtensionCheckError:
    unreadable, or not an ELF64 shared object)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ExtensionCheckError(f"{path}: {exc.strerror or exc}") from None
    try:
        sections = _sections(data)
        needed: list[str] = []
        runtime = 0
        for kind, offset, size, link, entsize in sections:
            strtab = sections[link][1] if link < len(sections) else 0
            if kind == SHT_DYNAMIC:
                for pos in range(offset, offset + size, entsize or 16):
                    tag, value = struct.unpack_from("<qQ", data, pos)
                    if tag == DT_NEEDED:
                        needed.append(_string(data, strtab, value))
            elif kind == SHT_DYNSYM:
                for pos in range(offset, offset + size, entsize or 24):
                    name_index, _info, _other, shndx = struct.unpack_from("<IBBH", data, pos)
                    if shndx == SHN_UNDEF or not name_index:
                        continue
                    name = _string(data, strtab, name_index)
                    if any(m in name for m in _RUNTIME_MARKERS) or name.startswith(_RUNTIME_PREFIXES):
                        runtime += 1
    except (struct.error, ValueError, IndexError) as exc:
        raise ExtensionCheckError(f"{path}: not a readable ELF shared object ({exc})") from None
    return Linkage(str(path), tuple(needed), runtime)


def refuse_static_libstdcxx(path: str | Path) -> Linkage:
    """The linkage, or ExtensionCheckError naming the cause and the fix for an extension with libstdc++ inside."""
    found = linkage(path)
    if found.static_libstdcxx:
        raise ExtensionCheckError(
            f"exllamav3's extension {found.path} has libstdc++ linked in statically (it does not link "
            f"{LIBSTDCXX} yet defines {found.runtime_symbols} of its iostream/locale symbols): beside torch's "
            f"libstdc++ its first std::ifstream read crashes (SIGSEGV in physical_core_order). Fix: {FIX}"
        )
    return found


def installed_extension() -> Path | None:
    """The extension file exllamav3 would import, found without importing exllamav3: a precompiled module on
    the path first (ext.py's is_precompiled_extension_available), else torch's JIT build of it; None if not
    built yet (the first import compiles it)."""
    spec = importlib.util.find_spec(EXTENSION)
    if spec is not None and spec.origin and spec.origin.endswith(".so"):
        return Path(spec.origin)
    try:
        from torch.utils import cpp_extension
    except ImportError:
        return None
    built = Path(cpp_extension._get_build_directory(EXTENSION, False)) / f"{EXTENSION}.so"
    return built if built.is_file() else None


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else installed_extension()
    if path is None:
        print(f"{EXTENSION}: not built yet (exllamav3 compiles it at its first import; the adapter checks it then)")
        return 0
    try:
        print(refuse_static_libstdcxx(path).describe())
    except ExtensionCheckError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
