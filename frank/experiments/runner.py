"""The experiment runner: executes the frozen order cell by cell, resumable after a kill at any moment.

A cell is one slot of the drawn order: start the engine with the arm's knobs (a fresh start per cell),
wait until ready, replay the workload, stop, record. Each step is an event in the journal, fsynced before
the next step begins, so the journal alone tells where a killed runner was:

    runner_started  cell_started  engine_ready  replay_done  engine_stopped  cell_done   (one attempt)
    cell_failed / cell_interrupted   (an attempt that did not finish: the design's failure rule applies)
    block_voided    runner_stopped {reason: finished | interrupted | retries_exhausted | error}

On start the runner folds the journal (`fold`); an attempt that was started but never closed was cut off
(runner or engine killed): it is recorded as `cell_interrupted`, its leftover engine is stopped, and the
failure rule decides: retry the same slot (up to `max_retries` more attempts) or void the block. A lock
file (flock, released by the kernel when the holder dies) keeps two runners off one run.

`ExperimentState` (frozen) is the live view for the console, rebuilt from the journal: current cell,
per-block values and signs, running tally, and whether the rule can still be met.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from frank import jobs
from frank.errors import FrankError
from frank.experiments import exact
from frank.experiments.design import Design
from frank.experiments.errors import RunError
from frank.experiments.journal import Journal, read_events
from frank.experiments.randomize import Slot
from frank.experiments.registry import Run
from frank.experiments.tally import BlockResult, BlockTally, tally_blocks
from frank.jobs import lock_holder  # noqa: F401  (re-exported: tests and the CLI read it here)

CLOSING = ("cell_done", "cell_failed", "cell_interrupted")
Note = Callable[..., dict]


class CellError(FrankError):
    """One attempt of a cell failed (engine did not start, crashed, replay broke): the failure rule applies."""


class RunnerInterrupted(BaseException):
    """A stop request (SIGTERM, SIGINT): unwind through the cell (its engine is stopped), record, exit."""


# -- folding the journal ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    slot: int
    attempt: int
    status: str  # running | done | failed | interrupted
    started: dict[str, Any]
    closed: dict[str, Any] | None = None
    phase: str = "starting"  # starting | replaying | stopping | closed

    @property
    def value(self) -> float | None:
        return self.closed.get("value") if self.closed and self.status == "done" else None


@dataclass(frozen=True)
class Progress:
    attempts: dict[int, tuple[Attempt, ...]]
    voided: frozenset[int]
    stopped_reason: str | None  # reason of the last runner_stopped, if the last runner stopped
    runner_sessions: int

    def done(self, slot: int) -> dict[str, Any] | None:
        for a in self.attempts.get(slot, ()):
            if a.status == "done":
                return a.closed
        return None

    def failures(self, slot: int) -> int:
        return sum(1 for a in self.attempts.get(slot, ()) if a.status in ("failed", "interrupted"))

    @property
    def open_attempt(self) -> Attempt | None:
        for attempts in self.attempts.values():
            for a in attempts:
                if a.status == "running":
                    return a
        return None


def fold(events: Iterable[dict[str, Any]]) -> Progress:
    attempts: dict[int, list[Attempt]] = {}
    voided: set[int] = set()
    stopped: str | None = None
    sessions = 0

    def replace_last(slot: int, **changes: Any) -> None:
        items = attempts.get(slot)
        if items and items[-1].status == "running":
            items[-1] = replace(items[-1], **changes)

    for ev in events:
        kind = ev.get("event")
        if kind == "runner_started":
            sessions += 1
            stopped = None
        elif kind == "runner_stopped":
            stopped = ev.get("reason")
        elif kind == "cell_started":
            attempts.setdefault(ev["slot"], []).append(Attempt(ev["slot"], ev["attempt"], "running", ev))
        elif kind == "engine_ready":
            replace_last(ev["slot"], phase="replaying")
        elif kind == "replay_done":
            replace_last(ev["slot"], phase="stopping")
        elif kind in CLOSING:
            status = {"cell_done": "done", "cell_failed": "failed", "cell_interrupted": "interrupted"}[kind]
            replace_last(ev["slot"], status=status, closed=ev, phase="closed")
        elif kind == "block_voided":
            voided.add(int(ev["block"]))
    return Progress(
        attempts={k: tuple(v) for k, v in attempts.items()},
        voided=frozenset(voided),
        stopped_reason=stopped,
        runner_sessions=sessions,
    )


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
    reason: str  # finished | interrupted | retries_exhausted | error
    message: str = ""
    cells_run: int = 0


def run_experiment(
    run: Run, executor: CellExecutor, *, on_event: Callable[[dict], None] | None = None, handle_signals: bool = False
) -> RunnerResult:
    """Execute (or resume) the run until every cell is done, voided, or the failure rule stops it."""
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
            return _run(run, executor, note)
        finally:
            if previous:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)


def _run(run: Run, executor: CellExecutor, note: Note) -> RunnerResult:
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


# -- live state for the console ------------------------------------------------------------------------


@dataclass(frozen=True)
class CellView:
    slot: int
    start: int
    block: int | None
    arm: str
    status: str  # pending | running | done | failed | interrupted | voided
    attempts: int
    value: float | None
    phase: str = ""


@dataclass(frozen=True)
class ExperimentState:
    run_id: str
    name: str
    kind: str
    design_sha256: str
    status: str  # registered | running | stopped | finished | failed
    runner_pid: int | None
    current: CellView | None
    cells: tuple[CellView, ...]
    blocks: tuple[BlockResult, ...]  # blocks designs
    wins: int  # the tally (tally.py), the same the decision counts: a voided block is in none of these
    losses: int
    ties: int
    remaining: int  # blocks (or starts) still to measure
    can_still_meet: bool
    best_possible_p: float | None
    smallest_p: float | None
    p_value: float | None = None  # the sign test over the blocks complete so far (blocks designs)
    stopped_reason: str | None = None
    events: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)


def load_state(run: Run) -> ExperimentState:
    events = read_events(run.journal_path)
    progress = fold(events)
    design = run.design
    holder = lock_holder(run.lock_path)
    cells = []
    for slot in run.slots:
        attempts = progress.attempts.get(slot.slot, ())
        done = progress.done(slot.slot)
        if done is not None:
            status = "done"
        elif slot.block is not None and slot.block in progress.voided:
            status = "voided"
        elif attempts:
            status = attempts[-1].status if not (attempts[-1].status == "running" and holder is None) else "interrupted"
        else:
            status = "pending"
        phase = attempts[-1].phase if attempts and status == "running" else ""
        cells.append(
            CellView(
                slot=slot.slot,
                start=slot.slot + 1,
                block=slot.block,
                arm=slot.arm,
                status=status,
                attempts=len(attempts),
                value=done.get("value") if done else None,
                phase=phase,
            )
        )
    current = next((c for c in cells if c.status == "running"), None)
    tally = _tally(design, cells, progress.voided)
    if tally is None:
        blocks, w, l, t, p = (), 0, 0, 0, None
        remaining = sum(1 for c in cells if c.value is None)
    else:
        blocks, w, l, t, p, remaining = tally.blocks, tally.wins, tally.losses, tally.ties, tally.p_value, tally.missing
    best = _best_possible_p(design, cells, tally)
    can_meet = _can_still_meet(design, l, t, progress.voided, best)
    stopped = progress.stopped_reason
    if holder is not None:
        status = "running"
    elif stopped == "finished":
        status = "finished"
    elif stopped == "retries_exhausted":
        status = "failed"
    elif progress.runner_sessions:
        status = "stopped"
    else:
        status = "registered"
    return ExperimentState(
        run_id=run.run_id,
        name=design.name,
        kind=design.kind,
        design_sha256=design.sha256,
        status=status,
        runner_pid=holder,
        current=current,
        cells=tuple(cells),
        blocks=blocks,
        wins=w,
        losses=l,
        ties=t,
        remaining=remaining,
        can_still_meet=can_meet,
        best_possible_p=best,
        smallest_p=exact.smallest_p(design),
        p_value=p,
        stopped_reason=stopped,
        events=len(events),
    )


def _tally(design: Design, cells: list[CellView], voided: frozenset[int]) -> BlockTally | None:
    """The decision's own tally over the cells measured so far (None: not a blocks design)."""
    if design.kind != "blocks":
        return None
    values: dict[int, dict[str, float | None]] = {}
    for c in cells:
        if c.block is not None:
            values.setdefault(c.block, {})[c.arm] = c.value
    return tally_blocks(design, values, voided)


def _best_possible_p(design: Design, cells: list[CellView], tally: BlockTally | None) -> float | None:
    """The p-value if every unmeasured cell came out as favourably as possible (None: a criteria rule)."""
    rule = design.rule
    if rule.test == "criteria":
        return None
    if tally is not None:
        k = tally.complete + tally.missing  # voided blocks are out of the test
        return exact.sign_test(k - tally.losses - tally.ties, k).p_value if k > 0 else None
    if design.kind == "balanced":
        # Far enough out that a pending cell decides its side, near enough that the measured values still
        # order the relabellings in floating point (1e18 swallowed them: every relabelling tied).
        measured = [c.value for c in cells if c.value is not None]
        span = (max(measured) - min(measured) if measured else 0.0) or 1.0
        low, high = min(measured, default=0.0) - 1000 * span, max(measured, default=0.0) + 1000 * span
        good, bad = (low, high) if rule.direction == "lower" else (high, low)
        tvals = [c.value if c.value is not None else good for c in cells if c.arm == rule.treatment]
        cvals = [c.value if c.value is not None else bad for c in cells if c.arm == rule.control]
        return exact.permutation_test(tvals, cvals, rule.direction).p_value
    return None


def _can_still_meet(design: Design, l: int, t: int, voided: frozenset[int], best: float | None) -> bool:
    rule = design.rule
    if design.kind == "blocks" and rule.require_all and (l or t or voided):
        return False
    if rule.alpha is not None and best is not None and best > rule.alpha:
        return False
    return True
