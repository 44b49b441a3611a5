#!/usr/bin/env bash
# The four models `make model` and `make test-model` build (into FRANK_MODELS when it is set), in two lanes
# side by side: the builds are mostly single-threaded (the tiny models train on one thread, so their bytes
# are the same on every machine), so two lanes use both cores of a 2-core machine. tiny-frank-moe comes
# after tiny-frank, whose tokenizer it reuses. The lanes weigh about the same (CPU seconds measured here:
# tiny-frank 8, tiny-frank-moe 24, tiny-frank-swa 10 | smollm2-135m 37).
#
#   scripts/build_models.sh [FRANK]     (default .venv/bin/frank; idempotent: a current build is skipped)
set -uo pipefail
FRANK=${1:-.venv/bin/frank}
lane() {
    for model in "$@"; do
        "$FRANK" model build --model "$model" || return 1
    done
}
lane tiny-frank tiny-frank-moe tiny-frank-swa &
first=$!
lane smollm2-135m &
second=$!
rc=0
wait "$first" || rc=1
wait "$second" || rc=1
exit "$rc"
