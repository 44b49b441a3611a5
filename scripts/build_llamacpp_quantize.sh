#!/usr/bin/env bash
# llama.cpp's own quantizer and importance-matrix tool (llama-quantize, llama-imatrix), CPU only, built from
# the source `make llamacpp-src` unpacks (scripts/pack_llamacpp_source.sh: llama-cpp-python 0.3.36's vendored
# llama.cpp, the version of the llama-server the GPU scripts build). Only those two targets, two jobs at most
# (the machine is shared). Idempotent: a second run finds both binaries and does nothing.
#
#   scripts/build_llamacpp_quantize.sh [DEST]     (default .device; binaries in DEST/llama-quantize/bin)
set -euo pipefail

DEST=${1:-.device}
JOBS=${FRANK_BUILD_JOBS:-2}
SRC="$DEST/src/llama_cpp_python-0.3.36/vendor/llama.cpp"
BUILD="$DEST/llama-quantize"
TARGETS=(llama-quantize llama-imatrix)

if [ -x "$BUILD/bin/llama-quantize" ] && [ -x "$BUILD/bin/llama-imatrix" ]; then
    echo "$BUILD/bin: llama-quantize and llama-imatrix already built"
    exit 0
fi
if [ ! -f "$SRC/CMakeLists.txt" ]; then
    echo "$SRC: no llama.cpp source (run \`make llamacpp-src\`)" >&2
    exit 2
fi
# Static libraries and no CURL/server/tests: the two tools stand alone in bin/.
cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DCMAKE_RUNTIME_OUTPUT_DIRECTORY="$(cd "$DEST" && pwd)/llama-quantize/bin" >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}"
ls -l "$BUILD/bin/llama-quantize" "$BUILD/bin/llama-imatrix"
