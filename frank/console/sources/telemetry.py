"""Telemetry: the sampler's thread signals each new snapshot; this source turns it into a TelemetryView
(the snapshot, the sparklines' history, the last requests seen running alone) and posts it. One post per
sample at most, none while no new sample came."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from frank.console.messages import TelemetrySampled
from frank.console.sources.base import Post, Source
from frank.console.state import SeenRequest, TelemetryView
from frank.engine.telemetry.sampler import Snapshot

SPARK_POINTS = 60  # the sparklines' width in samples
REQUESTS = 8
WAIT_S = 60.0  # the sampler wakes this source; this is only a backstop


class SnapshotSource(Protocol):
    """What the console needs of a sampler (frank.engine.telemetry.sampler.Sampler, or a recorded one)."""

    def latest(self) -> Snapshot | None: ...
    def history(self, seconds: float | None = None) -> list[Snapshot]: ...
    def subscribe(self, callback: Callable[[Snapshot], None]) -> Callable[[], None]:
        """Call `callback(snapshot)` on the sampler's thread after each sample; returns an unsubscribe."""
        ...


class TelemetrySource(Source[TelemetryView]):
    name = "telemetry"

    def __init__(self, post: Post, sampler: SnapshotSource) -> None:
        super().__init__(post)
        self.sampler = sampler
        self._unsubscribe = sampler.subscribe(lambda _snap: self.poll_now())

    def stop(self, timeout: float = 2.0) -> None:
        self._unsubscribe()
        super().stop(timeout)

    def interval(self) -> float:
        return WAIT_S

    def message(self, view: TelemetryView) -> TelemetrySampled:
        return TelemetrySampled(view)

    def read(self) -> TelemetryView:
        last = self.last or TelemetryView()
        snap = self.sampler.latest()
        if snap is None or (last.snapshot is not None and snap.seq == last.snapshot.seq):
            return last
        history = tuple(self.sampler.history(SPARK_POINTS * snap.period_s))
        requests = last.requests
        seen = snap.engine.last_request
        if seen is not None and (not requests or requests[-1].delta is not seen):
            at = time.strftime("%H:%M:%S", time.localtime(snap.wall_time))
            requests = (*requests, SeenRequest(at, seen))[-REQUESTS:]
        return TelemetryView(snap, history, requests)
