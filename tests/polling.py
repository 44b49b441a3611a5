"""Deadline polls for the tests: wait for a condition instead of sleeping, and assert the result
(`assert wait_for(...)`; tests/unit/test_static_rules.py checks that every call's result is asserted)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(condition: Callable[[], object], timeout_s: float, step_s: float = 0.01) -> bool:
    """Poll `condition` until it holds (True) or `timeout_s` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(step_s)
    return True
