#!/usr/bin/env bash
# exllamav3 1.6.5's CPU-expert runtime under frank, ON the offline GPU machine (issues 39 and 48; docs/gpu-run.md,
# "exllamav3's CPU experts"), resumed call by call (a call lasts at most 10 minutes; a warm machine keeps $W):
#
#   1. setup: the carried wheels (scripts/device-wheels.txt, scripts/exl3-wheels.txt) into $W/site; exllamav3's C++/CUDA
#      extension unpacked when carried (scripts/build_exl3_ext.sh builds it without a GPU), else its compile
#      STARTED FIRST, in the background, with the SYSTEM compiler (the image's CXX under /opt/gcc links libstdc++
#      in statically, and that extension crashes beside torch: docs/exl3.md, "The crash and its cause") into a
#      TORCH_EXTENSIONS_DIR of its own (TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16: another arch list starts a second
#      compile; a lock left by a compile that was killed is removed, or every import waits on it forever), and
#      llama.cpp's CUDA llama-server built beside it unless carried;
#   2. frank-moe-exl3 (the DeepSeek-V4 shape at 1.2B, DSpark stage) drawn from the carried kit while the
#      extension compiles: its GGUFs (llama.cpp) and its DeepSeek-layout checkpoint;
#   3. SmolLM2-135M: the checkpoint derived from the carried Q4_1 GGUF (in parts over the first calls), widened to
#      exllamav3's 128-wide blocks (the same function: frank.engine.models.exl3_widen) and quantized to
#      EXL3 3.0 bpw by exllamav3's converter, `frank fidelity floor` on it (KL on code/agent/prose against the
#      float32 reference, beside the reference and engine floors);
#   4. the extension's linkage and CPU side alone (scripts/exl3_cpu_probe.py: a static libstdc++ is refused);
#      frank-moe-exl3 quantized to EXL3 3.0 bpw (its DSpark stage with it), `exl3-gpu-moe` started through
#      frank (cpu_threads auto): a request, telemetry (the CPU MoE worker's threads), a W01 mini replay launched
#      from the console's replays menu with the dashboard's shot mid-replay and keypress-to-paint
#      (scripts/console_shots.py --replay), its verify steps and CPU-expert wait, the engine log's
#      EXL3_MOE_CPU_PROF / EXL3_SPLIT_PROF lines;
#   5. the none / a third / all table for both schedules at 4, 8 and auto threads, exllamav3 beside llama.cpp
#      on the same shape (benchmarks/bench_cpu_experts.py), exllamav3's own prof figures in every row.
# Phases 3 and 5's llama.cpp half are opt-in (FRANK_EXL3_SMOLLM2=1, FRANK_EXL3_LLAMACPP=1): SmolLM2's GGUF takes
# two carries, and llama.cpp's rows came back from the first run.
# FRANK_EXL3_SETUP_ONLY=1 stops once frank-moe-exl3 is converted and the extension checked (phases 1, 2 and
# 4's probe and converter), with the stamp `setup`: scripts/device_exl3_campaign.sh calls it so, then sources
# the environment it leaves in $W/exl3-env.sh (a dry run stamps `setup` where it stops).
# Every phase leaves a stamp in $W/done; a call does what its budget allows and the next goes on. Call it
# again until it prints "all done". Everything comes back in $OUT (exl3-N.tar.gz, run-N.log).
#
#   here:   scripts/stage_exl3_device.sh .device/i39
#   there:  FRANK_DEVICE_DIR=$PWD/.device/i39/c1 bash scripts/device_exl3.sh   (call 1: carry .device/i39/c1)
#           FRANK_DEVICE_DIR=$PWD/.device/i39/c2 bash scripts/device_exl3.sh   (call 2: carry .device/i39/c2,
#           FRANK_DEVICE_DIR=$PWD/.device/i39/c3 bash scripts/device_exl3.sh    call 3: c3: SmolLM2's GGUF parts)
#           bash scripts/device_exl3.sh                                          (later calls: nothing carried)
#
# A dry run here (no CUDA: phases that need exllamav3 stop with what they lack, the rest runs):
#   FRANK_EXL3_DRY_RUN=1 FRANK_EXL3_PYTHON_BASE=$PWD/.venv/bin/python FRANK_EXL3_MODEL_PYTHON=$PWD/.venv-engine/bin/python \
#   FRANK_EXL3_MODEL=tiny-frank-moe FRANK_DEVICE_DIR=$PWD/.device/i39/c1 FRANK_EXL3_WORK=/tmp/frank-exl3-dry \
#   bash scripts/device_exl3.sh       (then again with .device/i39/c2: SmolLM2's checkpoint, no EXL3)
set -uo pipefail

TREE=$(cd "$(dirname "$0")/.." && pwd)
D=${FRANK_DEVICE_DIR:-}
OUT=${OUT:-/tmp/frank-exl3-out}
W=${FRANK_EXL3_WORK:-/tmp/frank-exl3}
BUDGET_S=${FRANK_EXL3_BUDGET_S:-560}
DRY=${FRANK_EXL3_DRY_RUN:-}
BASE_PY=$(command -v "${FRANK_EXL3_PYTHON_BASE:-python3}")   # the machine's python: torch 2.11, CUDA 13
MODEL_PY=$(command -v "${FRANK_EXL3_MODEL_PYTHON:-$BASE_PY}")  # torch and transformers: models, the reference
MODEL=${FRANK_EXL3_MODEL:-frank-moe-exl3}
WITH_SMOLLM2=${FRANK_EXL3_SMOLLM2:-}
WITH_LLAMACPP=${FRANK_EXL3_LLAMACPP:-}
SETUP_ONLY=${FRANK_EXL3_SETUP_ONLY:-}
mkdir -p "$W/models" "$W/done" "$W/parts" "$OUT"
N=$(( $(cat "$W/calls" 2>/dev/null || echo 0) + 1 )); echo "$N" >"$W/calls"
LOG=$W/logs-$N
mkdir -p "$LOG"
cd "$W" || exit 1   # not the checkout's root: `python3 -m frank...` would import whatever frank is there first
export FRANK_HOME=$W/home FRANK_MODELS=$W/models PYTHONUNBUFFERED=1 PYTHONPATH=$TREE:$W/site
export FRANK_LLAMACPP_SRC=$W/llama.cpp FRANK_ENGINE_PYTHON=$MODEL_PY
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16
# every JIT build of exllamav3's extension by the system compiler, into a folder no /opt/gcc build was left in
export CXX=/usr/bin/g++ CC=/usr/bin/gcc CUDAHOSTCXX=/usr/bin/g++ TORCH_EXTENSIONS_DIR=$W/torch-ext
PY=$BASE_PY
frank() { "$PY" -m frank.console.cli "$@"; }
stamp() { echo "== $(date -u +%H:%M:%S) [$SECONDS s] $*"; }
left() { echo $(( BUDGET_S - SECONDS )); }
done_() { [ -f "$W/done/$1" ]; }
mark() { date -u +%FT%TZ >"$W/done/$1"; }
finish() {
    stamp "pack"
    frank engine stop --json >/dev/null 2>&1
    local keep=("logs-$N" done)
    for d in home/data/runs home/state/logs bench; do [ -d "$W/$d" ] && keep+=("$d"); done
    tar -czf "$OUT/exl3-$N.tar.gz" --exclude='*.npz' --exclude='*.safetensors' -C "$W" "${keep[@]}"
    cp "$LOG/run.log" "$OUT/run-$N.log"
}
trap finish EXIT
trap "exit 143" TERM INT
exec > >(tee "$LOG/run.log") 2>&1

# ---------------------------------------------------------------- 1. setup
stamp "call $N (carried: ${D:-nothing})"
if [ -n "$D" ]; then cp "$D"/smollm2-gguf.* "$W/parts/" 2>/dev/null; fi
if [ -n "$D" ] && [ -d "$D/wheels" ] && ! done_ wheels; then
    if [ -z "$DRY" ]; then  # the wheels are the H200 machine's (cp312); a dry run uses its own venv
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$W/site" "$D"/wheels/*.whl || exit 1
    fi
    mkdir -p "$W/llama.cpp" && tar -xzf "$D/llama.cpp-convert.tar.gz" -C "$W/llama.cpp" || exit 1
    [ -f "$D/llama.cpp-src.tar.gz" ] && { mkdir -p "$W/llama.cpp-src" && tar -xzf "$D/llama.cpp-src.tar.gz" -C "$W/llama.cpp-src"; }
    [ -d "$D/kit-$MODEL" ] && cp -r "$D/kit-$MODEL" "$W/"
    mark wheels
fi
if [ -n "$D" ] && compgen -G "$D/llama-bin.part-*" >/dev/null; then  # a llama-server an earlier call built
    mkdir -p "$W/build" && cat "$D"/llama-bin.part-* | tar -xz -C "$W/build" && stamp "llama-server: carried"
fi
# The engine's python: the machine's, with exllamav3's wheels (frank's kind sets PYTHONPATH to the checkout).
cat >"$W/exl3-python" <<EOF
#!/bin/sh
PYTHONPATH="\${PYTHONPATH:+\$PYTHONPATH:}$W/site" exec "$BASE_PY" "\$@"
EOF
chmod +x "$W/exl3-python"
export FRANK_EXL3_PYTHON=$W/exl3-python
{   # the environment of every step, for the scripts that run after this one (device_exl3_campaign.sh sources it)
    for v in FRANK_HOME FRANK_MODELS PYTHONUNBUFFERED PYTHONPATH FRANK_LLAMACPP_SRC FRANK_ENGINE_PYTHON NCCL_NVLS_ENABLE \
        TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS TORCH_CUDA_ARCH_LIST MAX_JOBS CXX CC CUDAHOSTCXX \
        TORCH_EXTENSIONS_DIR FRANK_EXL3_PYTHON; do printf 'export %s=%q\n' "$v" "${!v}"; done
    printf 'PY=%q\nMODEL_PY=%q\nMODEL=%q\n' "$PY" "$MODEL_PY" "$MODEL"
} >"$W/exl3-env.sh"
{ nproc; nvidia-smi -L; "$PY" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, torch.version.cuda)'; } \
    >"$LOG/env.txt" 2>&1; cat "$LOG/env.txt"

EXT_DIR=$("$PY" -c 'import torch.utils.cpp_extension as c; print(c._get_build_directory("exllamav3_ext", False))' 2>/dev/null)
# A build of the extension carried in (scripts/build_exl3_ext.sh, or an earlier call's export below): exllamav3
# imports a module named exllamav3_ext from the path before it compiles anything (ext.py, is_precompiled_extension_available).
EXT_SO=$W/site/exllamav3_ext.so
if [ -n "$D" ] && compgen -G "$D/exl3-ext.part-*" >/dev/null && ! done_ compile && [ -z "$DRY" ]; then
    bash "$TREE/scripts/exl3_ext_parts.sh" unpack "$D" "$EXT_SO" "$PY" &&
        mark compile && mark ext-export && stamp "exllamav3's extension: carried"
fi
compile_alive() { [ -f "$W/compile.pid" ] && kill -0 "$(cat "$W/compile.pid")" 2>/dev/null; }
if ! done_ compile && ! compile_alive; then
    if [ -n "$EXT_DIR" ] && [ -f "$EXT_DIR/lock" ]; then
        stamp "a stale compile lock ($EXT_DIR/lock, no compile of ours alive): removed"; rm -f "$EXT_DIR/lock"
    fi
    stamp "exllamav3's extension: compile in the background (sm_90, 16 jobs)"
    ( "$W/exl3-python" -c 'from exllamav3.ext import exllamav3_ext; print("extension ready")' >"$W/compile.log" 2>&1 &&
        mark compile ) &
    echo $! >"$W/compile.pid"
fi
export_extension() {  # the built extension as carried parts into $OUT (scripts/exl3_ext_parts.sh; at most 56 MB)
    done_ ext-export && return 0
    [ -f "$EXT_DIR/exllamav3_ext.so" ] || return 0
    local rc=0
    bash "$TREE/scripts/exl3_ext_parts.sh" pack "$EXT_DIR/exllamav3_ext.so" "$OUT" "$PY" || rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || return 0   # 3: too big for a carry, said; not tried again
    mark ext-export
}
wait_compile() {  # true once the extension is built (waits at most until the call's budget allows)
    while ! done_ compile; do
        compile_alive || { stamp "the extension's compile failed:"; tail -25 "$W/compile.log"; return 1; }
        [ "$(left)" -gt 30 ] || return 1
        sleep 5
    done
    [ -n "$DRY" ] || export_extension
}
LLAMA_BIN=$W/build/bin/llama-server
building() { [ -f "$W/llama-build.pid" ] && kill -0 "$(cat "$W/llama-build.pid")" 2>/dev/null; }
if [ -n "$WITH_LLAMACPP" ] && [ ! -x "$LLAMA_BIN" ] && [ -f "$W/llama.cpp-src/CMakeLists.txt" ] && [ -z "$DRY" ] && ! building; then
    stamp "llama-server (CUDA, sm_90): build in the background, 8 jobs beside the extension's (ninja resumes a cut-off build)"
    (cmake -S "$W/llama.cpp-src" -B "$W/build" -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF &&
        ninja -C "$W/build" -j8 llama-server && tar -czf - -C "$W/build" bin | split -b 15000000 - "$OUT/llama-bin.part-") \
        >"$W/llama-build.log" 2>&1 &
    echo $! >"$W/llama-build.pid"
fi

# ---------------------------------------------------------------- 2. frank-moe-exl3 (CPU, beside the compile)
if ! done_ model; then
    stamp "draw $MODEL (kit: shapes and tokenizer)"
    KIT=(); [ -f "$W/kit-$MODEL/shapes.json" ] && KIT=(--kit "$W/kit-$MODEL")
    ( time "$MODEL_PY" -m frank.engine.models.moe_model build --model "$MODEL" --out "$FRANK_MODELS/$MODEL" "${KIT[@]}" ) \
        >"$LOG/model-build.json" 2>"$LOG/model-build.err" || { tail -30 "$LOG/model-build.err"; exit 1; }
    tail -3 "$LOG/model-build.err"; ls -la "$FRANK_MODELS/$MODEL" "$FRANK_MODELS/$MODEL/deepseek"
    mark model
fi

# ---------------------------------------------------------------- 3. SmolLM2: EXL3 3.0 bpw and its fidelity
SMOL=$FRANK_MODELS/smollm2-135m
convert() {  # IN OUT BITS: exllamav3's converter, its bundled calibration text (an entry-point script)
    local in=$1 out=$2 bits=$3 name
    name=$(basename "$(dirname "$out")")   # the model: its own work folder (the converter resumes from one)
    [ -f "$out/config.json" ] && return 0
    local job=(-i "$in" -o "$out.tmp" -b "$bits" -cr 16 -cc 512) how="new"
    if [ -f "$W/work-$name/args.json" ]; then job=(-r); how="resumed"; fi   # cut off by the end of a call
    stamp "exllamav3: $in -> $out ($bits bpw, $how)"
    # ended before the call's end if need be (exit 124): the converter resumes from its work folder next call
    local rc=0
    ( time timeout "$(( $(left) - 20 ))" "$W/exl3-python" -m exllamav3.conversion.convert_model -w "$W/work-$name" "${job[@]}" ) \
        >"$LOG/convert-$name.log" 2>&1 || rc=$?
    [ "$rc" -ne 124 ] || { stamp "the converter reached the call's end: it resumes in the next call"; exit 0; }
    [ "$rc" -eq 0 ] || { tail -30 "$LOG/convert-$name.log"; return 1; }
    mv "$out.tmp" "$out"; du -sh "$out"
}
if [ -n "$WITH_SMOLLM2" ] && ! done_ smollm2-fidelity; then
    GGUF=$W/parts/SmolLM2-135M-Instruct.Q4_1.gguf
    read -r SUM COUNT < <(cat "$W/parts/smollm2-gguf.sha256" 2>/dev/null || echo "- 0")
    HAVE=$(ls "$W"/parts/smollm2-gguf.part-* 2>/dev/null | wc -l)
    if [ ! -f "$GGUF" ] && [ "$COUNT" -gt 0 ] && [ "$HAVE" -eq "$COUNT" ]; then
        for i in $(seq 1 "$COUNT"); do cat "$W/parts/smollm2-gguf.part-$i"; done >"$GGUF.tmp"
        if [ "$(sha256sum "$GGUF.tmp" | cut -d' ' -f1)" = "$SUM" ]; then mv "$GGUF.tmp" "$GGUF"
        else echo "SmolLM2's GGUF parts do not add up"; rm -f "$GGUF.tmp"; fi
    fi
    if [ ! -f "$GGUF" ]; then
        stamp "SmolLM2 waits for its GGUF: $HAVE of $COUNT parts here (carry the next .device/i39/cN)"
    else
        if ! frank model verify --model smollm2-135m --json >/dev/null 2>&1; then
            stamp "derive SmolLM2's float32 checkpoint"
            FRANK_SMOLLM2_GGUF=$GGUF frank model build --model smollm2-135m --json >"$LOG/smollm2-build.json" \
                || { cat "$LOG/smollm2-build.json"; exit 1; }
        fi
        # exllamav3's converter cannot take SmolLM2's 576-wide residual: the same function widened to its
        # 128-wide blocks goes in (frank.engine.models.exl3_widen), the reference stays the checkpoint itself
        WIDE=$FRANK_MODELS/smollm2-135m-wide
        if [ ! -f "$WIDE/config.json" ]; then
            "$MODEL_PY" -m frank.engine.models.exl3_widen widen "$SMOL" "$WIDE.tmp" >"$LOG/smollm2-widen.json" \
                && "$MODEL_PY" -m frank.engine.models.exl3_widen check "$SMOL" "$WIDE.tmp" | tee "$LOG/smollm2-widen-check.json" \
                && mv "$WIDE.tmp" "$WIDE" || exit 1
        fi
        if wait_compile && convert "$WIDE" "$SMOL/exl3-3.0bpw" 3.0; then
            # exl3-gpu-moe's kind and adapter serving the 135M checkpoint's EXL3 (SmolLM2's tool format)
            mkdir -p "$FRANK_HOME/config/profiles"
            cat >"$FRANK_HOME/config/profiles/exl3-smollm2.toml" <<EOF
name = "exl3-smollm2"
kind = "exl3"
description = "exllamav3 serving SmolLM2-135M at EXL3 3.0 bpw (the fidelity row)"
python = "@env:FRANK_EXL3_PYTHON"
model = "@models/smollm2-135m/exl3-3.0bpw"
served_model_name = "smollm2-135m"
max_model_len = 8192
extra_args = ["--tool-call-parser", "hermes"]
EOF
            stamp "fidelity floor: EXL3 3.0 bpw against the float32 reference (two starts)"
            frank fidelity floor --profile exl3-smollm2 --json >"$LOG/fidelity-exl3-smollm2.json" 2>"$LOG/fidelity-exl3-smollm2.err" \
                && mark smollm2-fidelity
            tail -5 "$LOG/fidelity-exl3-smollm2.err"
            frank fidelity report "$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$LOG/fidelity-exl3-smollm2.json")" 2>&1 | tee "$LOG/fidelity-exl3-smollm2.txt"
        fi
    fi
fi

# ---------------------------------------------------------------- 4. frank-moe-exl3 under frank
[ -n "$DRY" ] && { [ -z "$SETUP_ONLY" ] || mark setup; stamp "dry run: the phases below need exllamav3 on a GPU"; exit 0; }
wait_compile || { stamp "the extension is still compiling: call again"; exit 0; }
if ! done_ cpu-probe; then  # the linkage, then the CPU side alone, a call a process (a crash runs again under cuda-gdb)
    stamp "exllamav3's extension: linkage and CPU side alone (scripts/exl3_cpu_probe.py)"
    "$W/exl3-python" "$TREE/scripts/exl3_cpu_probe.py" --timeout 120 --out "$LOG/probe" 2>&1 | tee "$LOG/cpu-probe.txt"
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || { stamp "the probe refused the extension or a call crashed (exit $rc): see $LOG/cpu-probe.txt"; exit 1; }
    mark cpu-probe
fi
SCHEDS="1 2"
# a model drawn before its export wrote DeepSeek's own dtypes: given them (idempotent; exllamav3 needs bf16 linears)
[ -d "$FRANK_MODELS/$MODEL/exl3-3.0bpw" ] || "$MODEL_PY" "$TREE/scripts/exl3_checkpoint_dtypes.py" "$FRANK_MODELS/$MODEL" || exit 1
# the converter takes about 220 s on this shape; cut off at the call's end, it resumes in the next call
if [ ! -f "$FRANK_MODELS/$MODEL/exl3-3.0bpw/config.json" ] && [ "$(left)" -lt 80 ]; then
    stamp "$(left) s left: the converter starts in the next call"; exit 0
fi
convert "$FRANK_MODELS/$MODEL/deepseek" "$FRANK_MODELS/$MODEL/exl3-3.0bpw" 3.0 || exit 1
if ! done_ exl3-headers; then  # the checkpoint's tensor table (names, dtypes, shapes, bytes): the split's fit
    "$PY" - "$FRANK_MODELS/$MODEL/exl3-3.0bpw" "$W/bench/exl3-checkpoint-headers.json" <<'PYEOF' && mark exl3-headers
import json, os, struct, sys
from pathlib import Path
src, out = Path(sys.argv[1]), Path(sys.argv[2])
tables = {}
for f in sorted(src.glob("*.safetensors")):
    with open(f, "rb") as h:
        n = struct.unpack("<Q", h.read(8))[0]
        tables[f.name] = json.loads(h.read(n))
config = json.loads((src / "config.json").read_text())
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps({"config": config, "files": tables, "bytes": {f.name: f.stat().st_size for f in src.glob("*.safetensors")}}))
print("checkpoint headers:", out, sum(len(t) for t in tables.values()), "tensors")
PYEOF
fi
if [ -n "$SETUP_ONLY" ]; then mark setup; stamp "setup done: $MODEL converted, the extension checked"; exit 0; fi
SERVED_NEEDS_S=${FRANK_EXL3_SERVED_NEEDS_S:-200}   # a start, a replay with CPU experts and the telemetry
REPLAY_LIMIT=${FRANK_EXL3_REPLAY_LIMIT:-5}          # the menu replay's requests of draw-1
if ! done_ served && [ "$(left)" -lt "$SERVED_NEEDS_S" ]; then
    stamp "$(left) s left, the served run needs about $SERVED_NEEDS_S: call again"; exit 0
fi
if ! done_ served; then
    stamp "serve $MODEL through exl3-gpu-moe"
    frank engine start --profile exl3-gpu-moe --dry-run | tee "$LOG/engine-dry-run.txt"
    frank engine start --profile exl3-gpu-moe --json >"$LOG/engine-start.json" || { frank engine logs -n 80; exit 1; }
    cat "$LOG/engine-start.json"
    read -r URL TOKEN < <("$PY" -c 'from frank.engine.controller import EngineController as C
c = C(); print(c.status().url, c.client_api_key or "")')
    curl -s -H "Authorization: Bearer $TOKEN" "$URL/v1/chat/completions" -H 'Content-Type: application/json' \
        -d '{"messages":[{"role":"user","content":"Write a merge function."}],"max_tokens":64,"temperature":0,"ignore_eos":true}' \
        | tee "$LOG/smoke.json"; echo
    ps -o pid,nlwp,pcpu,args --ppid "$("$PY" -c 'from frank.engine.controller import EngineController as C; print(C().status().pid)')" \
        | tee "$LOG/engine-children.txt"   # the CPU MoE worker: a spawned child process
    stamp "telemetry (0.5 s) beside a W01 mini replay launched from the console's replays menu"
    "$PY" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
        "$PY" -m frank.console.cli telemetry --period 0.5 --json >"$LOG/telemetry.json" &
    TEL_PID=$!; sleep 2
    # the console itself: replays menu (draw-1, 5 requests, full mode), the shots mid-replay, keypress-to-paint
    timeout "$(( $(left) - 25 ))" "$PY" "$TREE/scripts/console_shots.py" --out-dir "$LOG/shots" --replay w01-mini \
        --draw draw-1 --limit "$REPLAY_LIMIT" --records 1 --samples 4 --keys 10 --timeout "$(( $(left) - 40 ))" \
        >"$LOG/shots.json" 2>"$LOG/shots.err"
    echo "console shots exit $?"; tail -3 "$LOG/shots.err"
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d.get("summary") or {}
print(json.dumps({"run": d.get("launched_run"), "draw-1": (s.get("draws") or {}).get("draw-1"), "key_to_paint": d.get("key_to_paint")}))' "$LOG/shots/console.json"
    kill -INT "$TEL_PID"; wait "$TEL_PID"
    frank engine logs -n 2000 >"$LOG/engine.log" 2>&1
    grep -E "moe_cpu prof|split prof|CPU split experts|CPU MoE" "$LOG/engine.log" | tail -20
    frank_py=("$PY" -m frank.engine.exl3.prof_log "$LOG/engine.log")   # exllamav3's own compute and stall figures
    "${frank_py[@]}" && "${frank_py[@]}" --json >"$LOG/prof.json"
    frank engine stop --json >/dev/null
    mark served
fi

# ---------------------------------------------------------------- 5. the table, beside llama.cpp
mkdir -p "$W/bench" "$FRANK_HOME/config/profiles"
# a thread count at a time (5 starts, about 2.5 minutes; none on the CPU runs once a schedule, with the first),
# each begun only with the time for it left in the call
for threads in auto 4 8; do
    if ! done_ "table-exl3-$threads" && [ "$(left)" -gt 260 ]; then
        stamp "the CPU-expert table: exllamav3 at $threads threads (none, a third, all; schedules $SCHEDS)"
        # shellcheck disable=SC2086 (SCHEDS is a list of numbers)
        SPLITS=(); [ "$threads" = auto ] || SPLITS=(--layers 21 63)   # none on the CPU: with auto only
        "$PY" "$TREE/benchmarks/bench_cpu_experts.py" --profile exl3-gpu-moe --threads "$threads" "${SPLITS[@]}" --scheds $SCHEDS --requests 2 \
            --max-tokens 64 --json "$W/bench/exl3-threads$threads.json" 2>"$LOG/bench-exl3-$threads.err" \
            | tee "$W/bench/exl3-threads$threads.txt" && mark "table-exl3-$threads"
    fi
done
done_ table-exl3-auto && done_ table-exl3-4 && done_ table-exl3-8 && mark table-exl3
if [ -n "$WITH_LLAMACPP" ] && ! done_ table-llamacpp && [ "$(left)" -gt 200 ]; then
    if building; then stamp "llama-server still building: call again"; exit 0; fi
    [ -x "$LLAMA_BIN" ] || { stamp "no llama-server (see $W/llama-build.log)"; tail -20 "$W/llama-build.log"; exit 1; }
    export FRANK_LLAMA_SERVER=$LLAMA_BIN
    export LD_LIBRARY_PATH=$W/build/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}  # a carried build's rpath is the builder's
    sed -e 's/^name = .*/name = "llamacpp-gpu-moe-exl3"/' -e "s#frank-moe-gpu/frank-moe-gpu#$MODEL/$MODEL#g" \
        -e "s/served_model_name = .*/served_model_name = \"$MODEL\"/" "$TREE/frank/engine/profiles/llamacpp-gpu-moe.toml" \
        >"$FRANK_HOME/config/profiles/llamacpp-gpu-moe-exl3.toml"
    stamp "the CPU-expert table: llama.cpp on the same shape (0, 4, 12 of 12 layers)"
    "$PY" "$TREE/benchmarks/bench_cpu_experts.py" --profile llamacpp-gpu-moe-exl3 --threads 8 16 --requests 2 \
        --max-tokens 64 --json "$W/bench/llamacpp.json" 2>"$LOG/bench-llamacpp.err" | tee "$W/bench/llamacpp.txt" \
        && mark table-llamacpp
fi
all_done() {
    done_ served && done_ table-exl3 || return 1
    [ -z "$WITH_SMOLLM2" ] || done_ smollm2-fidelity || return 1
    [ -z "$WITH_LLAMACPP" ] || done_ table-llamacpp
}
all_done && stamp "all done" || stamp "not all done: call again"
