"""Grader: the tests are untouched and every one of them passes, hidden cases of moving_sum and running_total
(drawn per draw) pass, and the task's own test command succeeds as its instruction runs it.

A test's outcome is decided here, never by the process that runs the agent's code: the hidden answer holds
each test's call and expected value (the tests are byte-identical to the ones generated), the probe only
calls the agent's functions and sends back what they returned, and this process compares type and value.
New test files, hooks and patched frameworks change nothing: no counts or results of a test runner are read.
"""

import hashlib

from frank.episodes.judge import Fail, cases, grade, probe, read_bytes, run_as_instructed, same

RUN = "python -m unittest discover -s tests -t ."  # the instruction's command, as the user runs it
PROBE = """
def _case(module, function, args):
    try:
        fn = getattr(__import__(module, fromlist=["_"]), function)
    except BaseException as exc:
        return {"raised": _type(exc).__name__, "value_error": False}
    return _call(fn, *args)


_emit({"results": [_case(*case) for case in _INPUT]})
"""


def _passes(got, want) -> bool:
    if "raises" in want:
        return isinstance(got, dict) and got.get("value_error") is True
    return same(got, want)


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
    tests, hidden = expected["tests"], expected["hidden"]
    calls = [[module, function, args] for _, module, function, args, _ in tests]
    calls += [[module, function, args] for module, function, args, _ in hidden]
    results = cases(probe(PROBE, calls, cpu_s=30, wall_s=90), "results", len(calls))
    failing = [name for (name, *_, want), got in zip(tests, results) if not _passes(got, want)]
    if failing:
        raise Fail(f"tests fail: {len(failing)} of {len(tests)} ({', '.join(failing[:3])})")
    failing = [
        f"{function}{tuple(args)}"
        for (_, function, args, want), got in zip(hidden, results[len(tests) :])
        if not _passes(got, want)
    ]
    if failing:
        raise Fail(f"hidden cases failing: {failing[:4]}")
    done = run_as_instructed(RUN, cpu_s=30, wall_s=90)
    if done.returncode != 0:
        tail = (done.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1][:200]
        raise Fail(f"`{RUN}` fails as the instruction runs it (exit status {done.returncode}): {tail}")
    return f"all {len(tests)} tests and {len(hidden)} hidden cases pass, and `{RUN}` succeeds"


grade(check)
