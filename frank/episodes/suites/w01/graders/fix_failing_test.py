"""Grader: the tests are untouched, they pass (run in the sandbox), and moving_sum and running_total pass
hidden cases (run in the sandbox, compared in type and value here)."""

import hashlib

from frank.episodes.judge import Fail, cases, grade, probe, read_bytes, same

MOVING_SUM = [
    (([1, 2, 3, 4, 5], 3), [6, 9, 12]),
    (([7], 1), [7]),
    (([1, 2], 3), []),
    (([0, 0, 1], 1), [0, 0, 1]),
    (([5, -2, 7, 0, 3], 2), [3, 5, 7, 3]),
    (([1, 2, 3], 3), [6]),
    (([], 2), []),
]
RUNNING_TOTAL = [([1, 2, 3], [1, 3, 6]), ([], []), ([-1, 5, 0], [-1, 4, 4])]
TESTS = """
import io, unittest
suite = unittest.TestLoader().discover("tests", top_level_dir="/workspace")
result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(suite)
problems = [str(test) for test, _ in result.failures + result.errors]
_emit({"run": result.testsRun, "problems": problems[:5], "count": len(problems)})
"""
HIDDEN = """
from ledger.core import moving_sum, running_total
_emit({
    "moving_sum": [_call(moving_sum, values, window) for values, window in _INPUT["moving_sum"]],
    "window_0": _call(moving_sum, [1, 2], 0),
    "running_total": [_call(running_total, values) for values in _INPUT["running_total"]],
})
"""


def check(expected):
    changed = []
    for path, sha in expected["tests_sha256"].items():
        try:
            same_bytes = hashlib.sha256(read_bytes(path)).hexdigest() == sha
        except Fail:
            same_bytes = False
        if not same_bytes:
            changed.append(path)
    if changed:
        raise Fail(f"tests changed: {changed[:5]}")
    tests = probe(TESTS, None, paths=(), cpu_s=30, wall_s=90)
    if not isinstance(tests, dict) or type(tests.get("count")) is not int or type(tests.get("run")) is not int:
        raise Fail("the test run gave a malformed result")
    if tests["count"] or tests["run"] < expected["tests_count"]:
        raise Fail(f"tests fail: {tests['count']} of {tests['run']} ({str(tests.get('problems'))[:200]})")
    inputs = {"moving_sum": [list(a) for a, _ in MOVING_SUM], "running_total": [v for v, _ in RUNNING_TOTAL]}
    result = probe(HIDDEN, inputs, cpu_s=10, wall_s=30)
    failing = [
        f"moving_sum{args}"
        for (args, want), got in zip(MOVING_SUM, cases(result, "moving_sum", len(MOVING_SUM)))
        if not same(got, {"value": want})
    ]
    failing += [
        f"running_total({values})"
        for (values, want), got in zip(RUNNING_TOTAL, cases(result, "running_total", len(RUNNING_TOTAL)))
        if not same(got, {"value": want})
    ]
    window_0 = result.get("window_0")
    if not (isinstance(window_0, dict) and window_0.get("value_error") is True):
        failing.append("moving_sum([1, 2], 0) must raise ValueError")
    if failing:
        raise Fail(f"hidden cases failing: {failing[:4]}")
    return f"all {tests['run']} tests and the hidden cases pass"


grade(check)
