"""The experiment runner: executes the frozen order cell by cell, resumable after a kill at any moment.

A cell is one slot of the drawn order: start the engine with the arm's knobs (a fresh start per cell),
wait until ready, replay the workload, stop, record. Each step is an event in the journal, fsynced before
the next step begins, so the journal alone tells where a killed runner was:

    runner_started  cell_started  engine_ready  replay_done  engine_stopped  cell_done   (one attempt)
    cell_failed / cell_interrupted   (an attempt that did not finish: the design's failure rule applies)
    block_voided    runner_stopped {reason: finished | interrupted | time_limit | retries_exhausted | error}
    decided         (a design with stop_when_decided: no remaining start can change the decision)

On start the runner folds the journal (`fold`); an attempt that was started but never closed was cut off
(runner or engine killed): it is recorded as `cell_interrupted`, its leftover engine is stopped, and the
failure rule decides: retry the same slot (up to `max_retries` more attempts) or void the block. A lock
file (flock, released by the kernel when the holder dies) keeps two runners off one run.

A design with hosts runs its cells side by side, one in flight a host (a `Lanes` executor: the fleet's,
frank.experiments.placement): the runner starts the next cell of every free host, waits for any to end,
and records it, so each host's cells keep the drawn order and the journal stays this process's alone
(what a cell sends on the way is journaled as it comes back). A runner killed then leaves one open attempt
a host: each is cut off, cleaned up and retried on resume as above. Once the runner stops starting cells
(decided, retries exhausted, the time limit, a host not in the cluster) the cells in flight on the other
hosts finish and are recorded, except when it stops because the design is decided: those are cancelled
(their engines stopped) and recorded as `cell_interrupted`, so the decision and its p are exactly those of
the blocks it names. A plain executor is one lane: one cell at a time, in the drawn order.

A design with `stop_when_decided` is checked before every cell (frank.experiments.stopping): once the
blocks (starts) run so far decide it whatever the rest would give, the runner records `decided` (the
verdict, after which block, why) and stops as finished. The check is a function of the journal alone, so a
runner killed between the deciding cell and the `decided` event writes it on resume and runs nothing more.

A runner given `stop_by` (a wall-clock time) starts no cell after it: it stops between cells (reason
`time_limit`), nothing interrupted, and the next runner goes on with the next cell. That is how a run fits
into windows of limited time (a GPU machine lent by the call) without spending its retries.

The journal's fold is frank.experiments.journal.fold; the live board the console shows is
frank.experiments.board.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, runtime_checkable

from frank import jobs
from frank.errors import FrankError
from frank.experiments.design import Design
from frank.experiments.errors import RunError
from frank.experiments.journal import Attempt, Journal, JournalEvent, Progress, fold, read_events
from frank.experiments.randomize import Slot
from frank.experiments.registry import Run
from frank.experiments.stopping import Stop, stop_of
from frank.jobs import lock_holder  # noqa: F401  (re-exported: tests and the CLI read it here)


class Note(Protocol):
    """Appends one journal event (and tells the runner's listener): returns the record written."""

    def __call__(self, event: JournalEvent, **fields: Any) -> dict[str, Any]: ...


class CellError(FrankError):
    """One attempt of a cell failed (engine did not start, crashed, replay broke): the failure rule applies."""


class RunnerInterrupted(BaseException):
    """A stop request (SIGTERM, SIGINT): unwind through the cell (its engine is stopped), record, exit."""


@dataclass(frozen=True)
class Action:
    kind: str  # run | void | exhausted | finished
    slot: Slot | None = None
    attempt: int = 0


def next_action(design: Design, slots: tuple[Slot, ...], progress: Progress) -> Action:
    for slot in slots:
        if progress.done(slot.slot) is not None or (slot.block is not None and slot.block in progress.voided):
            continue
        failures = progress.failures(slot.slot)
        if failures == 0:
            return Action("run", slot, 1)
        if design.failure.action == "void_block" and slot.block is not None:
            return Action("void", slot)
        if failures <= design.failure.max_retries:
            return Action("run", slot, len(progress.attempts.get(slot.slot, ())) + 1)
        return Action("exhausted", slot)
    return Action("finished")


# -- the executor of one cell -------------------------------------------------------------------------


class CellExecutor(Protocol):
    def precheck(self, run: Run) -> None:
        """Refuse to begin (FrankError) when the machine is not ready, before any attempt is recorded."""

    def cleanup(self, run: Run, attempt: Attempt) -> str:
        """Stop whatever a cut-off attempt left running (its engine); say what was done."""

    def execute(self, run: Run, slot: Slot, attempt: int, note: Note) -> dict[str, Any]:
        """Run one attempt; journal intermediate events through `note`; return the `cell_done` fields
        (at least `value`); raise CellError when the attempt failed."""


@dataclass
class Flight:
    """A cell in flight: started (journaled) and not yet closed."""

    lane: str
    slot: Slot
    attempt: int
    where: dict[str, Any]  # the fields `place` added to its events (its host)
    handle: Any = None  # the executor's own (a Ray task's ref)


Ended = dict[str, Any] | FrankError  # a cell's `cell_done` fields, or why it did not finish (CellError: failed)


@runtime_checkable
class Lanes(Protocol):
    """A cell executor that runs cells side by side, one in flight a lane (a design's host): the runner
    starts a cell on every free lane, then waits for any to end. Only the runner journals: what a cell
    sends on the way (engine_ready, ...) comes back through `wait`'s and `cancel`'s `note`."""

    def precheck(self, run: Run) -> None:
        """As CellExecutor.precheck."""

    def cleanup(self, run: Run, attempt: Attempt) -> str:
        """As CellExecutor.cleanup (called for each attempt cut off with the previous runner)."""

    def lane(self, slot: Slot) -> str:
        """The lane (host) that runs this slot: a block's cells share one, in drawn order."""

    def place(self, run: Run, slot: Slot) -> dict[str, Any]:
        """The fields added to the slot's events; RunError when its lane cannot take it now."""

    def start(self, run: Run, slot: Slot, attempt: int) -> Any:
        """Begin one attempt and return at once: its handle."""

    def wait(self, run: Run, flights: list[Flight], note: Note) -> list[tuple[Flight, Ended]]:
        """Block until at least one flight has ended; journal what the flights sent meanwhile."""

    def cancel(self, run: Run, flights: list[Flight], note: Note) -> None:
        """Stop these flights (their engines stopped, within a bound) and journal what they sent."""


class OneLane:
    """A plain CellExecutor as one lane: the cells run one after another, in the drawn order, as `wait`
    executes the one cell in flight to its end."""

    def __init__(self, executor: CellExecutor) -> None:
        self.executor = executor

    def precheck(self, run: Run) -> None:
        self.executor.precheck(run)

    def cleanup(self, run: Run, attempt: Attempt) -> str:
        return self.executor.cleanup(run, attempt)

    def lane(self, slot: Slot) -> str:
        return ""

    def place(self, run: Run, slot: Slot) -> dict[str, Any]:
        return {}

    def start(self, run: Run, slot: Slot, attempt: int) -> Any:
        return None

    def wait(self, run: Run, flights: list[Flight], note: Note) -> list[tuple[Flight, Ended]]:
        (flight,) = flights
        try:
            return [(flight, self.executor.execute(run, flight.slot, flight.attempt, note))]
        except FrankError as exc:  # a stop request (RunnerInterrupted) unwinds through the cell instead
            return [(flight, exc)]

    def cancel(self, run: Run, flights: list[Flight], note: Note) -> None:
        pass  # nothing runs between two calls of `wait`


# -- lock ---------------------------------------------------------------------------------------------


class RunLock(jobs.RunLock):
    """The run's one lock (frank.jobs.RunLock on runner.lock), refusing with the runner's words."""

    def refused(self, holder: int | None) -> Exception:
        return RunError(
            f"another runner (pid {holder or '?'}) is running this experiment; "
            f"follow it with `frank experiment status RUN_ID --follow`"
        )


# -- the runner -------------------------------------------------------------------------------------


@dataclass
class RunnerResult:
    reason: str  # finished | interrupted | time_limit | retries_exhausted | error
    message: str = ""
    cells_run: int = 0


def run_experiment(
    run: Run,
    executor: CellExecutor | Lanes,
    *,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    handle_signals: bool = False,
    stop_by: float | None = None,
) -> RunnerResult:
    """Execute (or resume) the run until every cell is done, voided, or the failure rule stops it; with
    `stop_by` (time.time()), also before the first cell that would start after it."""
    if not run.design.runnable:
        raise RunError(
            f"{run.run_id}: an external design's measures come from elsewhere; "
            f"use `frank experiment analyze DESIGN.toml RESULTS.csv`"
        )
    with RunLock(run.lock_path), Journal(run.journal_path) as journal:

        def note(event: JournalEvent, **fields: Any) -> dict[str, Any]:
            record = journal.append(event, **fields)
            if on_event:
                on_event(record)
            return record

        previous = _install_signals() if handle_signals else None
        try:
            return _run(run, executor, note, stop_by)
        finally:
            if previous:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)


def _run(run: Run, executor: CellExecutor | Lanes, note: Note, stop_by: float | None = None) -> RunnerResult:
    lanes: Lanes = executor if isinstance(executor, Lanes) else OneLane(executor)
    progress = fold(read_events(run.journal_path))
    note(
        "runner_started",
        pid=os.getpid(),
        sid=os.getsid(0),
        host=socket.gethostname(),
        resumed=progress.runner_sessions > 0,
    )
    flights: dict[str, Flight] = {}  # lane -> its cell in flight
    cells_run = 0
    ending: RunnerResult | None = None  # once set, no new cell starts: the runner ends when none is in flight
    error: FrankError | None = None  # ... and then raises this
    try:
        for cut in progress.open_attempts:  # cut off with the previous runner (one a lane)
            done = lanes.cleanup(run, cut)
            note(
                "cell_interrupted",
                slot=cut.slot,
                attempt=cut.attempt,
                phase=cut.phase,
                reason="the previous runner ended mid-cell (killed, or the machine went down)",
                cleanup=done,
                **({"host": cut.started["host"]} if "host" in cut.started else {}),
            )
        lanes.precheck(run)
        while True:
            progress = fold(read_events(run.journal_path))
            if ending is None and error is None:
                stop = decided_stop(run, progress)
                if stop is not None:
                    if progress.decided is None:
                        note("decided", **stop.to_json())
                    ending = RunnerResult("finished", stop.summary())
                    # cells in flight on other lanes cannot change the decision: cancelled, not counted
                    _interrupt(run, lanes, flights, note, f"cancelled: the design was decided ({stop.summary()})")
                else:
                    try:
                        step = _start_cells(run, lanes, note, progress, flights, stop_by)
                    except FrankError as exc:  # e.g. a host not in the cluster: the cells in flight finish first
                        error = exc
                        continue
                    if step == "voided":
                        continue  # a block was voided: fold again before the next start
                    ending = step
            if not flights:
                break
            for flight, outcome in lanes.wait(run, list(flights.values()), note):
                slot, attempt = flight.slot, flight.attempt
                del flights[flight.lane]
                ids = {"slot": slot.slot, "attempt": attempt}
                if isinstance(outcome, CellError):
                    note("cell_failed", **ids, arm=slot.arm, block=slot.block, error=str(outcome), **flight.where)
                elif isinstance(outcome, FrankError):
                    note("cell_interrupted", **ids, reason=f"runner error: {outcome}", **flight.where)
                    error = error or outcome
                else:
                    note("cell_done", **ids, arm=slot.arm, block=slot.block, **{**flight.where, **outcome})
                    cells_run += 1
        if error is not None:
            raise error
        assert ending is not None
        result = replace(ending, cells_run=cells_run)
    except RunnerInterrupted as exc:
        _interrupt(run, lanes, flights, note, str(exc) or "stopped")
        result = RunnerResult("interrupted", str(exc) or "stopped", cells_run)
    except FrankError as exc:
        _interrupt(run, lanes, flights, note, f"runner error: {exc}")
        note("runner_stopped", reason="error", message=str(exc))
        raise
    note("runner_stopped", reason=result.reason, message=result.message, cells_run=result.cells_run)
    return result


def _start_cells(
    run: Run, lanes: Lanes, note: Note, progress: Progress, flights: dict[str, Flight], stop_by: float | None
) -> RunnerResult | Literal["voided"] | None:
    """Start the next cell of every lane with none in flight. Returns how the run ends (every cell done or
    voided, retries exhausted, the time limit), "voided" after voiding a block, None to go on."""
    by_lane: dict[str, list[Slot]] = {}
    for s in run.slots:
        by_lane.setdefault(lanes.lane(s), []).append(s)
    for lane, slots in by_lane.items():
        if lane in flights:
            continue
        action = next_action(run.design, tuple(slots), progress)
        if action.kind == "finished":
            continue
        assert action.slot is not None
        if action.kind == "void":
            note(
                "block_voided",
                block=action.slot.block,
                slot=action.slot.slot,
                reason=f"slot {action.slot.slot + 1} failed and the design voids the block",
            )
            return "voided"
        if action.kind == "exhausted":
            return RunnerResult(
                "retries_exhausted",
                f"slot {action.slot.slot + 1} ({action.slot.arm}) failed "
                f"{progress.failures(action.slot.slot)} times; the design allows "
                f"{run.design.failure.max_retries} retries",
            )
        if stop_by is not None and time.time() >= stop_by:
            left = sum(1 for s in run.slots if progress.done(s.slot) is None and s.block not in progress.voided)
            return RunnerResult("time_limit", f"the time limit came before start {action.slot.slot + 1}; {left} left")
        slot, attempt = action.slot, action.attempt
        arm = run.design.arm(slot.arm)
        where = lanes.place(run, slot)
        note(
            "cell_started",
            slot=slot.slot,
            attempt=attempt,
            arm=slot.arm,
            block=slot.block,
            profile=arm.profile,
            knobs=arm.knob_dict,
            **where,
        )
        try:
            handle = lanes.start(run, slot, attempt)
        except FrankError as exc:
            note("cell_interrupted", slot=slot.slot, attempt=attempt, reason=f"runner error: {exc}", **where)
            raise
        flights[lane] = Flight(lane, slot, attempt, where, handle)
    return None if flights else RunnerResult("finished", "every cell is done or voided")


def _interrupt(run: Run, lanes: Lanes, flights: dict[str, Flight], note: Note, reason: str) -> None:
    """Stop the cells in flight (their engines stopped) and record each as interrupted: redone on resume."""
    if not flights:
        return
    lanes.cancel(run, list(flights.values()), note)
    for flight in flights.values():
        note("cell_interrupted", slot=flight.slot.slot, attempt=flight.attempt, reason=reason, **flight.where)
    flights.clear()


def measured(run: Run, progress: Progress) -> list[tuple[int, int | None, str, float]]:
    """(start, block, arm, value) of every finished start that counts (not in a voided block)."""
    out = []
    for slot in run.slots:
        done = progress.done(slot.slot)
        if done is not None and not (slot.block is not None and slot.block in progress.voided):
            out.append((slot.slot + 1, slot.block, slot.arm, float(done["value"])))
    return out


def decided_stop(run: Run, progress: Progress) -> Stop | None:
    """The stop a design with stop_when_decided has reached, from the journal's fold alone."""
    if not run.design.stop_when_decided:
        return None
    return stop_of(run.design, measured(run, progress), progress.voided)


def _install_signals() -> dict[int, Any]:
    """SIGTERM/SIGINT stop cleanly (engine stopped, cell recorded as interrupted); SIGHUP (an SSH drop) is
    ignored so a runner started from a terminal keeps going."""

    def stop(signum: int, _frame: Any) -> None:
        raise RunnerInterrupted(f"stopped by {signal.Signals(signum).name}")

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, stop)
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    return previous
