#!/usr/bin/env bash
# `make test`'s pytest: the tests that need no engine (the unit tier and the console's Pilot tests not marked
# `engine`) as a session of their own, BESIDE the engine's (integration, e2e and the console's engine tests),
# and both results at the end. The engine's session spends most of its time in single-threaded engine starts
# and waits, which leaves one of a 2-core machine's cores idle; the other session fills it. Each session has
# its own FRANK_HOME, tmp dirs and leftover-engine check (tests/conftest.py).
#
#   scripts/test_tiers.sh PYTHON [PYTEST ARGS...]   (the args go to both sessions, e.g. --durations=25)
#
# A plain `pytest` still runs every tier in one session, one after the other.
set -uo pipefail
PY=${1:?usage: scripts/test_tiers.sh PYTHON [PYTEST ARGS...]}
shift
cd "$(dirname "$0")/.."

UNIT_LOG=$(mktemp "${TMPDIR:-/tmp}/frank-unit-tier.XXXXXX")
trap 'rm -f "$UNIT_LOG"' EXIT
start=$SECONDS
"$PY" -m pytest tests/unit tests/console -m "not engine" "$@" >"$UNIT_LOG" 2>&1 &
UNIT_PID=$!
trap 'kill "$UNIT_PID" 2>/dev/null; rm -f "$UNIT_LOG"' EXIT
"$PY" -m pytest tests/integration tests/e2e tests/console -m "engine or not console" "$@"
engine_rc=$?
engine_s=$((SECONDS - start))
wait "$UNIT_PID"
unit_rc=$?
echo
echo "======= tests/unit and the console's tests with no engine (a session of its own, run beside the one above) ======="
cat "$UNIT_LOG"
echo
echo "test tiers: the engine's (integration, e2e, console's engine tests) exit $engine_rc after ${engine_s} s;" \
    "no engine's (unit, console) exit $unit_rc;" \
    "both done after $((SECONDS - start)) s"
[ "$engine_rc" -eq 0 ] && [ "$unit_rc" -eq 0 ]
