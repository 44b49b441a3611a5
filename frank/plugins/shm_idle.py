"""A `vllm.general_plugins` entry point: vLLM's shared-memory readers sleep instead of spinning.

vLLM's multiprocess executor passes every step between the engine core and its worker through a
shared-memory ring (`shm_broadcast.MessageQueue`). A reader that read less than `busy_loop_s` (1 s, not
configurable) ago waits by spinning on `sched_yield()`; after that it parks on a zmq notification. The
CPU build always uses that executor (it refuses the in-process one), so after every request the worker
spins on a whole core for a second. On the 2-core machine the embedded engine is made for, that core is
half of what the API server has. Measured: the worker used 100% of a core for the 0.5 s after each
request, and the region cache's threaded first-time encode of a fresh 600 KB conversation took 61-121 ms
inside the engine against 59-62 ms alone.

Parking on the notification instead is not safe: with the busy loop cut to 0, 5 of 45 requests stalled
for 5 s (vLLM's recheck interval for a lost notification). So with FRANK_SHM_WAIT=sleep (the embedded
profiles) a waiting reader sleeps and re-reads the ring's own written flag, which stays the authority:
the sleep starts at 0.1 ms and grows with the time since the last read (1% of it) up to 5 ms. A step
message is seen at most that late (under 0.1 ms plus 1% of the gap while busy), an idle engine wakes at
most 200 times a second per reader, and no notification is ever relied on. Unset, vLLM's wait is used
as it is (the frankenstein profile, whose worker has cores of its own).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from frank.plugins import compat

logger = logging.getLogger(__name__)
_S = "vllm.distributed.device_communicators.shm_broadcast"
# The wait it replaces, and the reader that re-checks the ring's flag after every wait (compat.py).
PATCHES = compat.Patches(
    "shm-idle",
    (
        compat.Target(f"{_S}:SpinCondition.wait", {"0.32.0": ("(self, timeout_ms=)", "51a37ce714602605")}),
        compat.Target(
            f"{_S}:MessageQueue.acquire_read", {"0.32.0": ("(self, timeout=, indefinite=)", "3bc411b2385bba9a")}
        ),
    ),
)
ENV = "FRANK_SHM_WAIT"
MIN_SLEEP_S = 0.0001
MAX_SLEEP_S = 0.005
BACKOFF = 0.01


def register() -> None:
    mode = os.environ.get(ENV, "").strip().lower()
    if mode in ("", "spin", "vllm"):
        return
    if mode != "sleep":
        logger.error("%s=%r: expected sleep or spin; vLLM's wait left as it is", ENV, mode)
        return
    try:
        install()
    except Exception:  # a vLLM without this class: serve as it is
        logger.exception("frank shm idle: not installed")


def sleep_for(idle_s: float) -> float:
    """How long a reader sleeps before it re-reads the flag, `idle_s` after its last read."""
    return min(MAX_SLEEP_S, max(MIN_SLEEP_S, idle_s * BACKOFF))


def install() -> None:
    from vllm.distributed.device_communicators.shm_broadcast import SpinCondition

    original = SpinCondition.wait
    if getattr(original, "_frank_sleep", False):
        return
    if not compat.admit(PATCHES).compatible:  # logged and counted by compat: vLLM's wait left as it is
        return

    # Patched on the class, so readers made before this plugin loaded sleep too. The caller
    # (MessageQueue.acquire_read) re-checks the written flag, its timeout and shutdown after every wait.
    def wait(self: Any, timeout_ms: int | None = None) -> None:
        time.sleep(sleep_for(time.monotonic() - self.last_read))

    # marks on the patch itself (a function declares no attributes): frank.plugins.compat reads them
    wait._frank_sleep = True  # type: ignore[attr-defined]
    wait.__wrapped__ = original  # type: ignore[attr-defined]
    SpinCondition.wait = wait
