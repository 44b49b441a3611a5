#!/usr/bin/env bash
# llama.cpp's source for a GPU build on a machine with no network: the copy vendored in the sdist of
# llama-cpp-python (pinned below), trimmed of what a llama-server build never reads (models, docs, examples,
# tests, gguf-py, media, CI files) so it packs to about 11 MB, under what one device call carries.
# scripts/ stays: the build reads scripts/ui-assets.cmake. The untrimmed tree stays in $DEST/src for
# scripts/make_tiny_gguf.py (convert_hf_to_gguf.py, conversion/ and gguf-py/ of the same version).
#
#   scripts/pack_llamacpp_source.sh [DEST]     (default .device; idempotent: reuses the download)
set -euo pipefail

VERSION=0.3.36
DEST=${1:-.device}
PY=${PY:-python3}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
SDIST="$DEST/llama_cpp_python-$VERSION.tar.gz"
SRC="$DEST/src/llama_cpp_python-$VERSION/vendor/llama.cpp"
OUT="$DEST/llama.cpp-src.tar.gz"

if [ ! -f "$SDIST" ]; then
    "$PY" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$DEST"
fi
if [ ! -d "$SRC" ]; then
    mkdir -p "$DEST/src"
    tar -xzf "$SDIST" -C "$DEST/src"
fi

# Pack from a listing that leaves the trimmed folders out, so the full tree stays usable for conversion.
tar -czf "$OUT" -C "$SRC" \
    --exclude=./models --exclude=./docs --exclude=./examples --exclude=./tests --exclude=./gguf-py \
    --exclude=./media --exclude=./.devops --exclude=./.github \
    .
echo "$OUT: $(du -h "$OUT" | cut -f1) (llama.cpp from llama-cpp-python $VERSION)"
