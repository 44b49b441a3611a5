#!/usr/bin/env bash
# exllamav3 1.6.5's C++/CUDA extension built HERE, with no GPU, for the H200 machine, as the carried parts
# scripts/device_exl3.sh imports instead of compiling (its compile costs about 5 minutes of a session's 30).
# The build is the one exllamav3's own ext.py runs there (torch's JIT load, -Ofast, sm_90), on the same
# versions: torch 2.11.0 with CUDA 13.0 (PyPI's 2.11.0 is the CUDA 13.0 build the machine has as
# 2.11.0+cu130), Python 3.12, nvcc 13.0. The CPU kernels pick their instruction set at run time
# (target attributes, no -march=native), so the build does not depend on this machine's CPU.
#
#   scripts/build_exl3_ext.sh DEST      (from the checkout's root; DEST e.g. .device/exl3-ext, then
#                                        EXT_PARTS=DEST scripts/stage_exl3_device.sh .device/i39)
#
# Needs python3.12 (on PATH, pyenv's, or PY312=...), nvcc 13.0 (CUDA_HOME, default /usr/local/cuda-13.0), g++ and
# about 6 GB under FRANK_EXL3_BUILD (default .build/exl3-ext: a venv with torch's CUDA wheels, the build folder).
# About 23 minutes on 2 cores; a second run reuses the build.
set -euo pipefail

DEST=${1:?usage: scripts/build_exl3_ext.sh DEST}
TORCH=2.11.0   # the H200 machine's torch (docs/gpu-run.md: 2.11.0+cu130)
ARCH=9.0       # the H200, as scripts/device_exl3.sh builds it (TORCH_CUDA_ARCH_LIST)
B=$(realpath -m "${FRANK_EXL3_BUILD:-.build/exl3-ext}")
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}

# the first python3.12 that runs (a pyenv shim is on PATH even where its version is not selected)
if [ -z "${PY312:-}" ]; then
    for c in "$(command -v python3.12 || true)" "$HOME"/.pyenv/versions/3.12.*/bin/python3.12; do
        [ -x "$c" ] && "$c" -c pass 2>/dev/null && { PY312=$c; break; }
    done
fi
[ -n "${PY312:-}" ] && [ -x "$PY312" ] || { echo "no python3.12 (the H200 machine's Python): set PY312" >&2; exit 1; }
NVCC_RELEASE=$("$CUDA_HOME/bin/nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\),.*/\1/p' || true)
[ "$NVCC_RELEASE" = 13.0 ] || { echo "$CUDA_HOME/bin/nvcc is not CUDA 13.0 (${NVCC_RELEASE:-none}): set CUDA_HOME" >&2; exit 1; }

make -s exl3-wheel
mkdir -p "$B"
[ -x "$B/venv/bin/python" ] || "$PY312" -m venv "$B/venv"
VPY=$B/venv/bin/python
# torch, exllamav3 and its requirements (importing its ext module imports the package; ninja and numpy among
# them), at scripts/exl3-wheels.txt's pins: pip installs only what the venv lacks
mapfile -t PINS < <(grep -v '^#' scripts/exl3-wheels.txt | grep . | grep -v '^exllamav3==')
"$VPY" -m pip install -q .device/exl3/exllamav3-*.whl "torch==$TORCH" "${PINS[@]}"

# torch's CUDA wheels carry the toolkit's library headers (cusparse.h, cublas_v2.h) that a bare nvcc lacks; the
# venv's bin has the ninja torch's JIT build runs
CU13=$("$VPY" -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13"))')
export PATH=$CUDA_HOME/bin:$B/venv/bin:$PATH CPATH=$CU13/include${CPATH:+:$CPATH} LIBRARY_PATH=$CU13/lib${LIBRARY_PATH:+:$LIBRARY_PATH}
export TORCH_CUDA_ARCH_LIST=$ARCH MAX_JOBS=${MAX_JOBS:-$(nproc)} TORCH_EXTENSIONS_DIR=$B/ext
echo "building exllamav3's extension for sm_90 with $MAX_JOBS jobs into $B/ext (torch $TORCH, nvcc $NVCC_RELEASE)"
"$VPY" -c 'import time; t = time.time(); from exllamav3.ext import exllamav3_ext as e
print("extension ready:", e.__file__, f"{time.time() - t:.0f} s")'
bash scripts/exl3_ext_parts.sh pack "$B/ext/exllamav3_ext/exllamav3_ext.so" "$DEST" "$VPY"
ls -l "$DEST"
