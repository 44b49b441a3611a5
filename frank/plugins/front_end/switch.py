"""One part's process-wide state: its switch, its verify sampling and its counters (thread-safe)."""

from __future__ import annotations

import os
import random
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any, Required, TypedDict

from frank.plugins import compat

if TYPE_CHECKING:
    from frank.plugins.front_end.idle_release import IdleReleaseSnapshot

_ON = ("on", "1", "true", "yes")


def parse_verify(name: str, raw: str) -> float:
    """A verify setting: off/0 (default), on/all/1 (every request) or a fraction such as 0.05."""
    text = raw.strip().lower()
    if text in ("", "off", "0", "no", "false"):
        return 0.0
    if text in ("on", "all", "1", "yes", "true"):
        return 1.0
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected off, all or a fraction in (0, 1]") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name}={raw!r}: a fraction must be within [0, 1]")
    return value


class SwitchSnapshot(TypedDict, total=False):
    """A part's state as its control endpoint and /metrics give it (GET /frank/parts/NAME)."""

    name: Required[str]
    enabled: Required[bool]
    verify: Required[float]
    counts: Required[dict[str, int]]
    verify_error: str
    fault: str
    compat: dict[str, Any]  # frank.plugins.compat.Verdict.to_json
    refused: str
    # the engine-core halves add theirs (block_hash_memo.snapshot, held_prompt.core_snapshot)
    blocks_held: int
    max_blocks: int
    idle_release: IdleReleaseSnapshot
    held: list[dict[str, Any]]  # the prompts held: client, number, tokens, sha256


class PartRefused(RuntimeError):
    """Switching on a part that stayed off because vLLM's internals differ from the verified code."""


class PartSwitch:
    def __init__(self, name: str, env: str, verify_env: str, faults: tuple[str, ...] = ()) -> None:
        self.name = name
        # deliberate breakage on demand (POST /frank/parts/NAME/fault), for the revert loop's test: a part
        # with a fault set says so in every snapshot and counts `faulted` each time the fault acts
        self.faults = faults
        self.fault: str | None = None
        self.enabled = os.environ.get(env, "off").strip().lower() in _ON
        self.verify_error: str | None = None
        try:
            self.verify = parse_verify(verify_env, os.environ.get(verify_env, ""))
        except ValueError as exc:  # a bad value must not fail requests: verify everything and say why
            self.verify, self.verify_error = 1.0, str(exc)
        self.refused: str | None = None  # why the part stays off: vLLM's internals differ (compat.py)
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._rng = random.Random()

    def set_enabled(self, value: bool) -> None:
        if value and self.refused:
            raise PartRefused(self.refused)
        self.enabled = bool(value)

    def refuse(self, reason: str) -> None:
        """Off for good in this process: what it would patch is not the code it was verified on."""
        self.refused = reason
        self.enabled = False
        self.count("refused_incompatible")

    def set_fault(self, fault: str | None) -> None:
        if fault is not None and fault not in self.faults:
            known = ", ".join(self.faults) or "none"
            raise ValueError(f"part {self.name}: no fault {fault!r} (known: {known})")
        self.fault = fault

    def should_verify(self) -> bool:
        return self.verify >= 1.0 or (self.verify > 0.0 and self._rng.random() < self.verify)

    def count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counts[key] += n

    def snapshot(self) -> SwitchSnapshot:
        with self._lock:
            counts = dict(self._counts)
        out = SwitchSnapshot(name=self.name, enabled=self.enabled, verify=self.verify, counts=counts)
        if self.verify_error:
            out["verify_error"] = self.verify_error
        if self.fault:
            out["fault"] = self.fault
        verdict = compat.verdict_of(self.name)
        if verdict is not None:
            out["compat"] = verdict.to_json()
        if self.refused:
            out["refused"] = self.refused
        return out
