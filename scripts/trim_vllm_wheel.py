"""vLLM's CUDA wheel without what the GPU run never loads, so it travels in fewer carried parts.

    python3 scripts/trim_vllm_wheel.py IN.whl OUT.whl

Left out (each is imported only behind a guard that tolerates its absence, read in vLLM 0.26's source):
FlashAttention-2's kernels (`vllm_flash_attn/_vllm_fa2_C`: `flash_attn_interface.py` sets FA2_AVAILABLE =
False; the H200 takes FlashAttention-3, and float32 takes Triton attention anyway), the MoE kernels
(`_moe_C_stable_libtorch`, imported under contextlib.suppress(ImportError) in platforms/cuda.py: the tiny
models are dense), the Rust front end binary (`vllm-rs`, used only with VLLM_RUST_FRONTEND_PATH) and
DeepGEMM's extension for Pythons other than 3.12. Entries are copied as they are (same bytes); RECORD loses
the rows of what was left out. Prints the sizes and both wheels' sha256.
"""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path

LEFT_OUT = (
    "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so",
    "vllm/_moe_C_stable_libtorch.abi3.so",
    "vllm/vllm-rs",
)
OTHER_PYTHONS = ("cpython-310", "cpython-311", "cpython-313", "cpython-314")


def left_out(name: str) -> bool:
    return name in LEFT_OUT or (
        name.startswith("vllm/third_party/deep_gemm/_C.") and any(p in name for p in OTHER_PYTHONS)
    )


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main(src: Path, dst: Path) -> None:
    dropped = []
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            if left_out(info.filename):
                dropped.append(info.filename)
                continue
            data = zin.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                rows = data.decode().splitlines(keepends=True)
                data = "".join(r for r in rows if not left_out(r.split(",", 1)[0])).encode()
            zout.writestr(info, data, compress_type=info.compress_type)
    print(f"left out {len(dropped)}: {', '.join(dropped)}")
    print(f"{src.name}: {src.stat().st_size} bytes, sha256 {sha256(src)}")
    print(f"{dst.name}: {dst.stat().st_size} bytes, sha256 {sha256(dst)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
