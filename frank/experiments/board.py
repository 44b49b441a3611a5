"""The live board of a registered run, rebuilt from its journal: current cell, per-block values and signs,
the running tally (frank.experiments.tally, the one the decision counts) and whether the rule can still be
met. A frozen `ExperimentState` for the console and `frank experiment status`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from frank.experiments import exact, stopping
from frank.experiments.design import Design
from frank.experiments.journal import fold, read_events
from frank.experiments.registry import Run
from frank.experiments.tally import BlockResult, BlockTally, by_block, tally_blocks
from frank.jobs import lock_holder


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
    decided: dict[str, Any] | None = None  # the `decided` event: the run stopped when decided (stopping.Stop)
    events: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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
        decided=progress.decided,
        events=len(events),
    )


def _tally(design: Design, cells: list[CellView], voided: frozenset[int]) -> BlockTally | None:
    """The decision's own tally over the cells measured so far (None: not a blocks design)."""
    if design.kind != "blocks":
        return None
    return tally_blocks(design, by_block((c.block, c.arm, c.value) for c in cells), voided)


def _best_possible_p(design: Design, cells: list[CellView], tally: BlockTally | None) -> float | None:
    """The p-value if every unmeasured cell came out as favourably as possible (None: a criteria rule);
    the bounds the stopping rule reads (frank.experiments.stopping)."""
    if design.rule.test == "criteria":
        return None
    if tally is not None:
        return stopping.sign_p_bounds(tally)[0]
    if design.kind == "balanced":
        return stopping.permutation_p_bounds(design, [(c.arm, c.value) for c in cells if c.value is not None])[0]
    return None


def _can_still_meet(design: Design, l: int, t: int, voided: frozenset[int], best: float | None) -> bool:
    rule = design.rule
    if design.kind == "blocks" and rule.require_all and (l or t or voided):
        return False
    if rule.alpha is not None and best is not None and best > rule.alpha:
        return False
    return True
