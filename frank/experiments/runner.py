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
from dataclasses import dataclass
from typing import Any, Protocol

from frank import jobs
from frank.errors import FrankError
from frank.experiments.design import Design
from frank.experiments.errors import RunError
from frank.experiments.journal import Attempt, Journal, Progress, fold, read_events
from frank.experiments.randomize import Slot
from frank.experiments.registry import Run
from frank.experiments.stopping import Stop, stop_of
from frank.jobs import lock_holder  # noqa: F401  (re-exported: tests and the CLI read it here)

Note = Callable[..., dict]


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
    executor: CellExecutor,
    *,
    on_event: Callable[[dict], None] | None = None,
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

        def note(event: str, **fields: Any) -> dict:
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


def _run(run: Run, executor: CellExecutor, note: Note, stop_by: float | None = None) -> RunnerResult:
    progress = fold(read_events(run.journal_path))
    note(
        "runner_started",
        pid=os.getpid(),
        sid=os.getsid(0),
        host=socket.gethostname(),
        resumed=progress.runner_sessions > 0,
    )
    result = RunnerResult("error")
    current: tuple[Slot, int] | None = None
    try:
        cut = progress.open_attempt
        if cut is not None:
            done = executor.cleanup(run, cut)
            note(
                "cell_interrupted",
                slot=cut.slot,
                attempt=cut.attempt,
                phase=cut.phase,
                reason="the previous runner ended mid-cell (killed, or the machine went down)",
                cleanup=done,
            )
        executor.precheck(run)
        while True:
            progress = fold(read_events(run.journal_path))
            stop = decided_stop(run, progress)
            if stop is not None:
                if progress.decided is None:
                    note("decided", **stop.to_json())
                result = RunnerResult("finished", stop.summary(), result.cells_run)
                break
            action = next_action(run.design, run.slots, progress)
            if action.kind == "finished":
                result = RunnerResult("finished", "every cell is done or voided", result.cells_run)
                break
            assert action.slot is not None
            if action.kind == "void":
                note(
                    "block_voided",
                    block=action.slot.block,
                    slot=action.slot.slot,
                    reason=f"slot {action.slot.slot + 1} failed and the design voids the block",
                )
                continue
            if action.kind == "exhausted":
                result = RunnerResult(
                    "retries_exhausted",
                    f"slot {action.slot.slot + 1} ({action.slot.arm}) failed "
                    f"{progress.failures(action.slot.slot)} times; the design allows "
                    f"{run.design.failure.max_retries} retries",
                    result.cells_run,
                )
                break
            if stop_by is not None and time.time() >= stop_by:
                left = sum(1 for s in run.slots if progress.done(s.slot) is None and s.block not in progress.voided)
                result = RunnerResult(
                    "time_limit",
                    f"the time limit came before start {action.slot.slot + 1}; {left} left",
                    result.cells_run,
                )
                break
            slot, attempt = action.slot, action.attempt
            arm = run.design.arm(slot.arm)
            current = (slot, attempt)
            note(
                "cell_started",
                slot=slot.slot,
                attempt=attempt,
                arm=slot.arm,
                block=slot.block,
                profile=arm.profile,
                knobs=arm.knob_dict,
            )
            try:
                outcome = executor.execute(run, slot, attempt, note)
            except CellError as exc:
                current = None
                note("cell_failed", slot=slot.slot, attempt=attempt, arm=slot.arm, block=slot.block, error=str(exc))
                continue
            current = None
            note("cell_done", slot=slot.slot, attempt=attempt, arm=slot.arm, block=slot.block, **outcome)
            result.cells_run += 1
    except RunnerInterrupted as exc:
        if current is not None:
            note("cell_interrupted", slot=current[0].slot, attempt=current[1], reason=str(exc) or "stopped")
        result = RunnerResult("interrupted", str(exc) or "stopped", result.cells_run)
    except FrankError as exc:
        if current is not None:
            note("cell_interrupted", slot=current[0].slot, attempt=current[1], reason=f"runner error: {exc}")
        note("runner_stopped", reason="error", message=str(exc))
        raise
    note("runner_stopped", reason=result.reason, message=result.message, cells_run=result.cells_run)
    return result


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
