"""The W01 graders against attempts that must not pass: each task's shipped adversarial attempts (cheats,
near misses, junk, hangs) run in the sandbox as an agent's code would, then the real grader judges them.
Every one must be `fail`, for the reason its `# expect:` line names; the reference must still pass and the
untouched workspace fail."""

from __future__ import annotations

import dataclasses

import pytest

from frank.episodes.grade import attempts, check_references
from frank.episodes.suite import load_suite
from frank.episodes.tasks import GENERATORS

SUITE = load_suite("w01-mini")


@pytest.mark.parametrize("task_id", list(GENERATORS))
def test_every_shipped_attempt_fails_for_its_reason(task_id):
    task = SUITE.task(task_id)
    shipped = attempts(task)
    assert len(shipped) >= 5 and all(expect for _, expect in shipped), shipped
    [check] = check_references(dataclasses.replace(SUITE, tasks=(task,)))
    assert (check.reference, check.untouched) == ("pass", "fail"), check
    assert [a.attempt for a in check.adversarial] == [p.stem for p, _ in shipped]
    for attempt in check.adversarial:
        assert attempt.outcome == "fail", attempt
        assert attempt.expect in attempt.detail, attempt
