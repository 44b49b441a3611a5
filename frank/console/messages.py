"""Typed messages from the console's sources to the app (memray's live view; toolong's `can_replace`).

Each source (frank/console/sources/) owns one thread and posts one kind of message: a dataclass with one
field, the source's complete frozen view (frank/console/state.py). A message is sealed once built: its
fields cannot be reassigned. Because every message carries the whole view, a newer one makes an older
one still waiting in the app's queue stale, and Textual drops it (`can_replace`).
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass
from typing import Any

from textual.message import Message

from frank.console.state import (
    CampaignView,
    EngineReading,
    EpisodesView,
    ExperimentsView,
    FleetView,
    JobsView,
    LogIndexed,
    TelemetryView,
)


class SourceMessage(Message, bubble=False):
    """A dataclass message whose fields are fixed after construction; the newest of a kind wins."""

    def __post_init__(self) -> None:
        super().__post_init__()  # Message's own bookkeeping (sender, time)
        object.__setattr__(self, "_sealed", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_sealed", False) and name in getattr(self, "__dataclass_fields__", {}):
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super().__setattr__(name, value)

    def can_replace(self, message: Message) -> bool:
        return type(message) is type(self)


@dataclass(eq=False)
class TelemetrySampled(SourceMessage):
    view: TelemetryView


@dataclass(eq=False)
class EngineRead(SourceMessage):
    view: EngineReading


@dataclass(eq=False)
class JobsRead(SourceMessage):
    view: JobsView


@dataclass(eq=False)
class ExperimentsRead(SourceMessage):
    view: ExperimentsView


@dataclass(eq=False)
class EpisodesRead(SourceMessage):
    view: EpisodesView


@dataclass(eq=False)
class FleetRead(SourceMessage):
    view: FleetView


@dataclass(eq=False)
class CampaignRead(SourceMessage):
    view: CampaignView


@dataclass(eq=False)
class LogRead(SourceMessage):
    view: LogIndexed


@dataclass(eq=False)
class SourceFailed(SourceMessage):
    """A source's read raised: shown once as a notification; the source keeps its loop."""

    source: str
    error: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SourceFailed) and message.source == self.source
