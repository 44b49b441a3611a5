"""Grader: the package's tests pass, the tests are untouched, and moving_sum passes hidden cases."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

expected = json.loads(Path(sys.argv[1]).read_text())
changed = [
    p
    for p, sha in expected["tests_sha256"].items()
    if not Path(p).is_file() or hashlib.sha256(Path(p).read_bytes()).hexdigest() != sha
]
if changed:
    print(json.dumps({"pass": False, "detail": f"tests changed: {changed[:5]}"}))
    sys.exit(0)
run = subprocess.run(
    [sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", ".", "-q"],
    capture_output=True,
    text=True,
    timeout=100,
)
if run.returncode != 0:
    print(json.dumps({"pass": False, "detail": "tests fail: " + run.stderr.strip().splitlines()[-1][:200]}))
    sys.exit(0)
sys.path.insert(0, ".")
from ledger.core import moving_sum  # noqa: E402

cases = [(([1, 2, 3, 4, 5], 3), [6, 9, 12]), (([7], 1), [7]), (([1, 2], 3), []), (([0, 0, 1], 1), [0, 0, 1])]
bad = [args for args, want in cases if moving_sum(*args) != want]
print(json.dumps({"pass": not bad, "detail": f"hidden cases failing: {bad}" if bad else "all tests pass"}))
