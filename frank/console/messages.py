"""Typed messages from the console's background workers to its screens (memray live view / harlequin style).

Workers (threads) never touch widgets: they post one of these to the app, which keeps the newest in its
state (ConsoleState) and passes the message on to the active screen; a screen that is not shown catches up
from the state when it is shown again. None bubbles, so a screen's handler is the end of the road.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message

from frank.jobs import JobStatus


class EngineStateChanged(Message, bubble=False):
    """A status poll finished: the controller's EngineStatus and the log's last lines."""

    def __init__(self, status: Any, log_tail: list[str]) -> None:
        super().__init__()
        self.status = status
        self.log_tail = log_tail


class JobsListed(Message, bubble=False):
    """The jobs running now (every kind), newest first."""

    def __init__(self, running: list[JobStatus]) -> None:
        super().__init__()
        self.running = running


class JobProgressed(Message, bubble=False):
    """The followed job's status and the records appended since the previous poll."""

    def __init__(self, status: JobStatus, records: list[dict[str, Any]]) -> None:
        super().__init__()
        self.status = status
        self.records = records


class ExperimentFolded(Message, bubble=False):
    """The followed experiment's journal folded again: its state, the frozen rule and (once ended) the report."""

    def __init__(self, state: Any, rule: Any, report: dict[str, Any] | None, error: str | None = None) -> None:
        super().__init__()
        self.state = state
        self.rule = rule
        self.report = report
        self.error = error
