"""Console test helpers: an app over the real controller (in the session's FRANK_HOME, engine stopped)
with recorded telemetry, and a fixed engine status for deterministic screens."""

from __future__ import annotations

import pytest

from frank.console.app import FrankApp, Services
from frank.console.state import ConsoleState, EngineReading, StartHint
from frank.engine.controller import EngineController, EngineStatus
from frank.engine.profiles import load_profile
from tests.console.recorded import RecordedSampler

READY = EngineStatus(
    state="ready",
    profile="embedded-cpu",
    pid=4242,
    pgid=4240,
    host="127.0.0.1",
    port=8000,
    url="http://127.0.0.1:8000",
    knobs={"num_speculative_tokens": 4, "region_cache": "on"},
    started_at=None,
    ready_s=61.8,
    uptime_s=3725.0,
    healthy=True,
    log_path="/var/lib/frank/state/logs/engine.log",
)
LOG_TAIL = [
    "INFO 11-30 04:02:11 [loggers.py:123] Engine 000: Avg prompt throughput: 21504.0 tokens/s, Avg generation throughput: 38.2 tokens/s",  # noqa: E501
    'INFO:     127.0.0.1:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "INFO 11-30 04:02:12 [metrics.py:88] SpecDecoding metrics: Mean acceptance length: 2.61, Accepted: 1043 tokens",
    'INFO:     127.0.0.1:51236 - "GET /metrics HTTP/1.1" 200 OK',
]


@pytest.fixture
def make_app(tmp_path, monkeypatch):
    """make_app(read_only=False, sampler=RecordedSampler(), status=None, poll=False, offer=False) -> FrankApp."""
    monkeypatch.setenv("FRANK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NO_COLOR", raising=False)

    def factory(
        *,
        read_only: bool = False,
        sampler=None,
        status: EngineStatus | None = None,
        poll: bool = False,
        theme: str | None = None,
        log_tail: list[str] | None = None,
        settings=None,
        offer: bool = False,
    ) -> FrankApp:
        controller = EngineController()
        state = None
        if status is not None:  # a fixed engine status instead of the engine source's reads
            state = ConsoleState(engine=fixed_engine(status, LOG_TAIL if log_tail is None else log_tail))
        return FrankApp(
            Services(controller=controller, sampler=sampler if sampler is not None else RecordedSampler()),
            read_only=read_only,
            theme=theme,
            poll_status=poll,
            remember_theme=True,
            state=state,
            settings=settings,
            offer_start=offer,  # a stopped engine's start offer (a dialog): only where a test is about it
        )

    return factory


def fixed_engine(status: EngineStatus, log_tail: list[str] | None = None) -> EngineReading:
    """An engine reading as the engine source would post it: the status, a log tail, the profile's knobs."""
    profile = status.profile or "embedded-cpu"
    loaded = load_profile(profile)
    start = StartHint(loaded.description, loaded.kind, None, loaded.startup_timeout_s)
    return EngineReading(
        status,
        tuple(log_tail or ()),
        profile,
        tuple(loaded.knobs.values()),
        start if status.state == "stopped" else None,
    )


async def wait_until(pilot, predicate, timeout_s: float = 2.0, step_s: float = 0.05) -> bool:
    """Let the app run until `predicate()` holds or `timeout_s` passes; returns the predicate's last value."""
    for _ in range(max(1, round(timeout_s / step_s))):
        await pilot.pause(step_s)
        if predicate():
            return True
    return bool(predicate())
