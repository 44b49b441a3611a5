"""The state sets of a job (a detached run of any kind), each one Literal with its tuple of values."""

from __future__ import annotations

from typing import Literal, get_args

# How a run ended cleanly, as its own files record it (a kind maps its own words onto these).
JobEnd = Literal["finished", "cancelled", "failed"]
JOB_ENDS: tuple[JobEnd, ...] = get_args(JobEnd)

# A run's state: running while its lock is held; else its recorded end; pending: registered, never started;
# interrupted: the process is gone and nothing records a clean end.
JobState = Literal["running", "finished", "cancelled", "failed", "interrupted", "pending"]
JOB_STATES: tuple[JobState, ...] = get_args(JobState)
