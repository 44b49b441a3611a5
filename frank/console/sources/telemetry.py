"""Telemetry: the sampler calls this source after each sample, on the sampler's own thread (no thread of
its own, so no extra wake-up per sample); it turns the snapshot into a TelemetryView (the snapshot, the
sparklines' last SPARK_POINTS samples, the last requests seen running alone) and posts it. One post per
sample, none while no new sample came."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from frank.console.messages import TelemetrySampled
from frank.console.sources.base import Post, Source
from frank.console.state import SeenRequest, TelemetryView
from frank.telemetry.sampler import Snapshot

SPARK_POINTS = 60  # the sparklines' width in samples
REQUESTS = 8


class SnapshotSource(Protocol):
    """What the console needs of a sampler (frank.telemetry.sampler.Sampler, or a recorded one)."""

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
        self._reading = threading.Lock()  # the first read (the app's thread) and the sampler's never overlap
        self._unsubscribe: Callable[[], None] | None = None

    def start(self) -> None:
        if self._unsubscribe is None:
            self._unsubscribe = self.sampler.subscribe(lambda _snap: self.read_once())
            self.read_once()  # a sampler that already holds samples shows at once

    def stop(self, timeout: float = 2.0) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def poll_now(self) -> None:
        self.read_once()

    def read_once(self) -> None:
        with self._reading:
            super().read_once()

    def interval(self) -> float:
        return 0.0  # (never looped: the sampler calls read_once)

    def message(self, view: TelemetryView) -> TelemetrySampled:
        return TelemetrySampled(view)

    def read(self) -> TelemetryView:
        last = self.last or TelemetryView()
        snap = self.sampler.latest()
        if snap is None or (last.snapshot is not None and snap.seq == last.snapshot.seq):
            return last
        if last.snapshot is not None and snap.seq == last.snapshot.seq + 1:
            history = (*last.history, snap)[-SPARK_POINTS:]  # the next sample: no copy of the sampler's buffer
        else:
            history = tuple(self.sampler.history(SPARK_POINTS * snap.period_s))[-SPARK_POINTS:]
        requests = last.requests
        seen = snap.engine.last_request
        if seen is not None and (not requests or requests[-1].delta is not seen):
            at = time.strftime("%H:%M:%S", time.localtime(snap.wall_time))
            requests = (*requests, SeenRequest(at, seen))[-REQUESTS:]
        return TelemetryView(snap, history, requests)
