"""Big lists a request leaves behind in the engine core, freed while the engine core is idle rather than on
the next request's path (held-prompt's engine-core half uses it).

The phase probe (docs/front-end-parts.md) found two frees of 120K-181K-entry lists between a warm W01
request's arrival and its QUEUED event, each a decrement of every int object's count (0.35-0.45 ms):
- held-prompt letting go of the prompt it held `CORE_HOLD` prompts back;
- the previous request's vLLM `Request` (its `_all_token_ids`): the engine core's input thread keeps the
  last request it preprocessed in a local variable (`request = self.preprocess_add_request(req)` in
  vLLM 0.32's `EngineCoreProc.process_input_sockets`), so the previous request dies when the next one is
  assigned to it, after that request's preprocessing and before it is queued.

Here an evicted list is handed over (`defer`) and a request's `Request` is watched (`watch`). The engine
core's busy loop calls `EngineCoreProc._notify_idle_state_callbacks` each time it finds no work; that wakes
a thread of this module, which waits `DELAY_S` (the last response's send goes first), and, while the engine
core still has no work, drops the deferred lists and every watched request that is finished and held by
nothing but this module (the input thread has moved on), so their memory is freed there. Nothing is
changed in any object, only when the last reference goes. Bounded: past `BOUND` objects waiting, the
oldest is dropped at once, which is when vLLM would have freed it, so an engine core that is never idle
keeps at most `BOUND` extra objects and pays what it pays today."""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any, NotRequired, TypedDict

from frank.plugins import compat

logger = logging.getLogger(__name__)
BOUND = 32
DELAY_S = 0.001
_C = "vllm.v1.engine.core:EngineCoreProc"
# The idle hook it wakes from, and the input loop whose local variable keeps the last request (compat.py).
PATCHES = compat.Patches(
    "idle-release",
    (
        compat.Target(f"{_C}._notify_idle_state_callbacks", {"0.32.0": ("(self)", "60f8e775daa97639")}),
        compat.Target(
            f"{_C}.process_input_sockets",
            {"0.32.0": ("(self, input_addresses, coord_input_address, identity, ready_event)", "33c7203e99177532")},
        ),
    ),
)


class IdleReleaseSnapshot(TypedDict):
    waiting: int
    released: int
    dropped_at_bound: int
    compat: NotRequired[dict[str, Any]]  # frank.plugins.compat.Verdict.to_json


class IdleRelease:
    def __init__(self, bound: int = BOUND, delay_s: float = DELAY_S) -> None:
        self.bound = bound
        self.delay_s = delay_s
        self._waiting: list[Any] = []  # oldest first: deferred lists and watched requests
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._thread: threading.Thread | None = None
        self._core: Any = None
        self.released = 0  # objects let go of in idle time
        self.dropped_at_bound = 0  # objects let go of on a request's path, the bound being reached

    def defer(self, obj: Any) -> None:
        """Hold `obj` (a list nothing else needs) until the engine core is idle."""
        self._add(obj)

    def watch(self, request: Any) -> None:
        """Hold vLLM's `Request` until it is finished and nothing else holds it; then it is freed in idle time."""
        self._add(request)

    def _add(self, obj: Any) -> None:
        with self._lock:
            self._waiting.append(obj)
            over = self._waiting[: -self.bound] if len(self._waiting) > self.bound else []
            del self._waiting[: len(over)]
        if over:
            self.dropped_at_bound += len(over)
            del over  # freed here, on the request's path: what vLLM does without this module

    def release(self) -> int:
        """Drop what can go now: every deferred list, and the watched requests that are finished and held
        only here. Returns how many objects were dropped."""
        with self._lock:
            waiting, self._waiting = self._waiting, []
        kept: list[Any] = []
        dropped = 0
        while waiting:
            obj = waiting.pop(0)
            # two references when only this holds it: `obj` and getrefcount's argument
            if _is_request(obj) and not (obj.is_finished() and sys.getrefcount(obj) == 2):
                kept.append(obj)
                continue
            del obj  # the last reference to a deferred list or a finished request: freed here
            dropped += 1
        if kept:
            with self._lock:
                self._waiting[:0] = kept
        self.released += dropped
        return dropped

    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)

    def on_idle(self, core: Any) -> None:
        """Called from the engine core's busy loop when it has no work."""
        if not self._waiting:
            return
        self._core = core
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="frank-idle-release", daemon=True)
            self._thread.start()
        self._idle.set()

    def _run(self) -> None:
        while True:
            self._idle.wait()
            self._idle.clear()
            time.sleep(self.delay_s)
            core = self._core
            try:
                if core is not None and not core.has_work() and core.input_queue.empty():
                    self.release()
            except Exception:  # never let a release stop the engine core
                logger.exception("frank idle release: error")

    def snapshot(self) -> IdleReleaseSnapshot:
        out = IdleReleaseSnapshot(
            waiting=self.waiting(), released=self.released, dropped_at_bound=self.dropped_at_bound
        )
        verdict = compat.verdict_of(PATCHES.part)
        if verdict is not None:
            out["compat"] = verdict.to_json()
        return out


def _is_request(obj: Any) -> bool:
    return hasattr(obj, "is_finished")


def install(core_module: Any, releaser: IdleRelease) -> bool:
    """Wake `releaser` from vLLM's idle hook (EngineCoreProc._notify_idle_state_callbacks). False when this
    vLLM has no such hook: then nothing is deferred (the caller frees at once)."""
    cls = getattr(core_module, "EngineCoreProc", None)
    original = getattr(cls, "_notify_idle_state_callbacks", None)
    if original is None:
        return False
    if getattr(original, "_frank_idle_release", False):
        return True
    if not compat.admit(PATCHES).compatible:  # not the verified code: nothing deferred, freed at once
        return False

    def _notify_idle_state_callbacks(self: Any) -> None:
        original(self)
        releaser.on_idle(self)

    # marks on the patch itself (a function declares no attributes): frank.plugins.compat reads them
    _notify_idle_state_callbacks._frank_idle_release = True  # type: ignore[attr-defined]
    _notify_idle_state_callbacks.__wrapped__ = original  # type: ignore[attr-defined]
    assert cls is not None  # found above (the patch returned False otherwise)
    cls._notify_idle_state_callbacks = _notify_idle_state_callbacks
    return True
