"""The console's state: one frozen view per source, and ConsoleState holding the newest of each.

Sources (frank/console/sources/) build these views in their threads from the headless layers and post them
(frank/console/messages.py); the app replaces its ConsoleState with a copy holding the new view; screens and
widgets only render it. Views are frozen and replaced, never edited, so "did this change?" is an identity
check, and a screen redraws only the parts whose view is new.

No Textual here: the views are plain data a test can build by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from frank.console.log_index import LogIndex
from frank.engine.controller import EngineStatus
from frank.engine.metrics import RequestDelta
from frank.engine.profiles import Knob
from frank.engine.records import EngineState
from frank.episodes.runner import EpisodesState
from frank.experiments.board import ExperimentState
from frank.experiments.design import Rule
from frank.experiments.screen import ScreenResult
from frank.jobs import JobStatus
from frank.telemetry.sampler import Snapshot
from frank.workloads.record import KnobFlip

# -- telemetry -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SeenRequest:
    """A request the sampler saw running alone (its server-side timings), with the time it ended."""

    at: str  # HH:MM:SS, the row key
    delta: RequestDelta


@dataclass(frozen=True)
class TelemetryView:
    snapshot: Snapshot | None = None
    history: tuple[Snapshot, ...] = ()  # oldest first: the sparklines' points
    requests: tuple[SeenRequest, ...] = ()  # the last few, oldest first


# -- engine ----------------------------------------------------------------------------------------------


# The engine's state as the console read it: the controller's, or unknown before the first read.
ReadingState = EngineState | Literal["unknown"]


@dataclass(frozen=True)
class StartHint:
    """What starting the next profile means: its description, engine kind, its last start-to-ready time
    here (None: never started here) and how long a start may take at most."""

    description: str = ""
    kind: str = ""
    last_ready_s: float | None = None
    timeout_s: float | None = None


@dataclass(frozen=True)
class EngineReading:
    """The controller's status, the log's last lines and the knobs of the profile it runs (or starts next)."""

    status: EngineStatus | None = None
    log_tail: tuple[str, ...] = ()
    profile: str = ""  # the profile a start uses
    knobs: tuple[Knob, ...] = ()
    start: StartHint | None = None  # what a start of that profile is and how long it takes (while stopped)
    folded: int = 0  # log lines after a clean stop left out of the tail (the engine's shutdown noise)

    @property
    def state(self) -> ReadingState:
        return self.status.state if self.status is not None else "unknown"

    def knob(self, name: str) -> Knob | None:
        return next((k for k in self.knobs if k.name == name), None)


@dataclass(frozen=True)
class LogIndexed:
    """The whole engine log's line index, kept up to date while the logs screen is up."""

    index: LogIndex | None = None
    lines: int = 0  # its line count when read (a grown log is a new view)


# -- jobs (replays and every other kind) -------------------------------------------------------------------


@dataclass(frozen=True)
class JobRecord:
    """One request record of a followed job (a replay's JSONL line), the fields the screens show."""

    draw: str
    id: str
    status: str
    ttft_s: float | None = None
    queue_s: float | None = None
    prefill_s: float | None = None
    front_end_s: float | None = None
    prompt_tokens: int | None = None
    timed: bool = False  # the record carries the server's timings
    live_knobs: tuple[tuple[str, str], ...] = ()  # the engine's live knob values it was sent with
    flips: tuple[KnobFlip, ...] = ()  # live knobs changed since the draw's request before (or while it ran)

    def knob(self, name: str) -> str | None:
        return next((value for knob, value in self.live_knobs if knob == name), None)


@dataclass(frozen=True)
class FollowedJob:
    """The job the console follows (launched here or found running): its status and newest records."""

    run_id: str
    status: JobStatus | None = None
    records: tuple[JobRecord, ...] = ()  # the newest REQUEST_ROWS
    received: int = 0  # records received so far (a screen draws only those it has not drawn)
    adopted: bool = False  # found running when the console started, not launched or picked here

    @property
    def running(self) -> bool:
        return self.status is not None and self.status.state == "running"


@dataclass(frozen=True)
class WorkloadRow:
    name: str
    shape: str  # draws x requests
    source: str


@dataclass(frozen=True)
class JobsView:
    jobs: tuple[JobStatus, ...] = ()  # every job of every kind, running first
    workloads: tuple[WorkloadRow, ...] = ()
    followed: FollowedJob | None = None

    @property
    def running(self) -> tuple[JobStatus, ...]:
        return tuple(j for j in self.jobs if j.state == "running")


# -- experiments and fidelity --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DesignRow:
    path: str
    name: str
    kind: str  # blocks | balanced | ... | error
    question: str  # (the error, for a broken design)
    arms: tuple[tuple[str, str], ...] = ()  # (name, knob values or profile)
    shape: str = ""
    measure: str = ""
    profile: str = ""
    smallest_p: float | None = None


@dataclass(frozen=True)
class ReportLine:
    """An ended run's decision, as the report computed it."""

    decision: str
    p_value: float | None = None
    null_size: int | None = None


@dataclass(frozen=True)
class FollowedExperiment:
    run_id: str
    state: ExperimentState | None = None
    rule: Rule | None = None
    report: ReportLine | None = None
    error: str = ""
    screen: ScreenResult | None = None  # a screen run: every setting's values so far and the pick


@dataclass(frozen=True)
class FidelitySet:
    name: str
    kl: float | None
    floor: float | None
    kl_over_floor: float | None


@dataclass(frozen=True)
class FidelityRun:
    id: str
    kind: str
    knobs: tuple[tuple[str, str], ...]
    sets: tuple[FidelitySet, ...]


@dataclass(frozen=True)
class FidelityView:
    latest: FidelityRun | None = None  # the newest saved run
    job: JobStatus | None = None  # the newest fidelity job (running, or how it ended)


@dataclass(frozen=True)
class ExperimentsView:
    designs: tuple[DesignRow, ...] = ()
    runs: tuple[str, ...] = ()  # registered run ids, newest first
    followed: FollowedExperiment | None = None
    fidelity: FidelityView = field(default_factory=FidelityView)


# -- episodes ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SuiteRow:
    name: str
    file: str
    tasks: int


@dataclass(frozen=True)
class EpisodeRunRow:
    run_id: str
    suite: str
    status: str
    done: int
    planned: int
    total_s: float
    passed: int


@dataclass(frozen=True)
class EpisodesView:
    suites: tuple[SuiteRow, ...] = ()
    runs: tuple[EpisodeRunRow, ...] = ()  # oldest first
    followed: EpisodesState | None = None


# -- campaign --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CampaignPart:
    """One part of the campaign as the board shows it (cells already worded) and what its actions name."""

    name: str
    state: str
    evidence: str
    rules: str
    up_next: str
    detail: str
    profile: str
    knobs: str
    design: str


@dataclass(frozen=True)
class CampaignView:
    file: str = ""
    name: str = ""
    alerts: tuple[str, ...] = ()
    parts: tuple[CampaignPart, ...] = ()
    problem: str = ""  # why there is no board: no campaign file, or its error
    fired: tuple[str, ...] = ()  # revert rules that fired since the previous read (notified once)
    read: int = 0  # reads so far (a new read with the same board still notifies what fired)


# -- fleet -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FleetView:
    """Every host of the fleet file as its Prometheus sees it (frank.fleet.query.HostStatus rows)."""

    fleet_file: str = ""
    prometheus: str = ""
    hosts: tuple[Any, ...] = ()
    error: str = ""  # no fleet file, or Prometheus did not answer


# -- the whole -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConsoleState:
    telemetry: TelemetryView = field(default_factory=TelemetryView)
    engine: EngineReading = field(default_factory=EngineReading)
    jobs: JobsView = field(default_factory=JobsView)
    experiments: ExperimentsView = field(default_factory=ExperimentsView)
    episodes: EpisodesView = field(default_factory=EpisodesView)
    campaign: CampaignView = field(default_factory=CampaignView)
    log: LogIndexed = field(default_factory=LogIndexed)
    fleet: FleetView = field(default_factory=FleetView)
    busy: str = ""  # an engine action in flight ("starting", ...)
