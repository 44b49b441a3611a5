"""The fidelity rule of experiment designs: "no worse than the control by more than the measured floor".

A design turns it on with a `[fidelity]` table (docs/experiments.md, docs/fidelity.md):

    [fidelity]
    sets = ["code", "agent", "prose"]   # text sets measured at every engine start (default: the shipped three)
    floor = "measured"                  # "measured", or a number (a KL tolerance fixed before the run)

Every cell then measures the arm's engine over the sets (`measure_cell`, after its replay or episodes,
before the engine stops) and keeps each set's KL, its reference floor and the engine's own top-k (an .npz
in the cell folder). The rule, per set:

    mean KL(treatment starts) <= mean KL(control starts) + floor

with floor = max(reference floor, engine floor) where "measured": the engine floor is the KL between the
first two control starts (two starts of the same configuration); with one control start it is the latest
`frank fidelity floor` run of the control's configuration, if any (else the reference floor alone, noted).
The guard `fidelity` fails when any set breaks the rule, so the decision is "not confirmed"; a revert rule
with `fidelity_regression = true` reverts on it. Measures taken elsewhere give rows `fidelity:SET` (a
start's KL) and optionally `fidelity_floor:SET` (a measured floor) in the results CSV.

With `reference = "control"` (a model with no reference checkpoint) a cell keeps only the engine's top k on
its own tokens (frank.fidelity.control) and the rule measures a part's effect relative to the control: the
first control start with a candidate file is the reference, every other start's KL is against its top k,
the control's mean is over the control starts other than it, and a measured floor is the engine floor. A
start whose scored token IDs differ from the reference start's fails the rule (frank.experiments.fidelity_control).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Annotated, Any, NotRequired, TypedDict

import numpy as np
from pydantic import BeforeValidator

from frank.errors import FrankError
from frank.experiments.tables import Refusals, one_of
from frank.tomlfile import Strict

FLOOR_MEASURED = "measured"
REFERENCES = ("model", "control")  # the checkpoint's transformers implementation, or the control's first start
CANDIDATE_FILE = "fidelity-candidate.npz"


class FidelityCanonical(TypedDict):
    """A fidelity rule in a design's canonical form (what its sha256 is taken over)."""

    sets: list[str]
    floor: str | float
    reference: NotRequired[str]


@dataclass(frozen=True)
class FidelityRule:
    sets: tuple[str, ...]
    floor: str | float  # FLOOR_MEASURED or a fixed KL tolerance
    reference: str = "model"  # one of REFERENCES

    def canonical(self) -> FidelityCanonical:
        # "reference" only when not the default, so designs registered before it keep their hashes
        out = FidelityCanonical(sets=list(self.sets), floor=self.floor)
        if self.reference != "model":
            out["reference"] = self.reference
        return out


def _floor_value(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f'expected "measured" or a number, got {value!r}')
    if isinstance(value, str) and value != FLOOR_MEASURED:
        raise ValueError(f'{value!r}: expected "measured" or a number')
    if not isinstance(value, str) and value < 0:
        raise ValueError(f"must be 0 or more, got {value}")
    return value


class FidelitySchema(Strict):
    """The `[fidelity]` table of a design (frank.experiments.design_schema)."""

    sets: list[Any] | None = None  # default: the shipped three
    floor: Annotated[str | float, BeforeValidator(_floor_value)] = FLOOR_MEASURED
    reference: Annotated[str, one_of(REFERENCES)] = "model"


def fidelity_rule(table: FidelitySchema, refusals: Refusals) -> FidelityRule:
    """The rule of a checked `[fidelity]` table; what the schema cannot say is added to `refusals`."""
    from frank.fidelity.sets import DEFAULT_SETS

    sets = list(DEFAULT_SETS) if table.sets is None else table.sets
    if not sets:
        refusals.add("fidelity.sets", "must name at least one text set")
    for i, name in enumerate(sets):
        if not isinstance(name, str) or not name:
            refusals.add(("fidelity", "sets", i), f"expected a set name or folder, got {name!r}")
    if all(isinstance(name, str) for name in sets) and len(set(sets)) != len(sets):
        refusals.add("fidelity.sets", "names a set twice")
    floor = table.floor if isinstance(table.floor, str) else float(table.floor)
    return FidelityRule(sets=tuple(sets), floor=floor, reference=table.reference)


def parse_fidelity(raw: Any, where: str) -> FidelityRule:
    """A `[fidelity]` table given as data; every error names `fidelity.FIELD`."""
    refusals = Refusals(where, None)
    table = refusals.validate(FidelitySchema, raw)
    rule = fidelity_rule(table, refusals) if table is not None else None
    refusals.check()
    assert rule is not None  # checked: no refusal
    return rule


def check_control_starts(rule: FidelityRule, control: str, starts: int | None, refusals: Refusals) -> None:
    """`reference = "control"` with a measured floor takes the floor from the first two control starts: the
    design must give the control arm two (`starts`: how many it gets; None for an external design, whose
    floor comes from `fidelity_floor:SET` rows)."""
    if rule.reference == "control" and rule.floor == FLOOR_MEASURED and starts is not None and starts < 2:
        refusals.add(
            "fidelity.reference",
            '"control" with floor = "measured" takes the floor from two starts of '
            f"the control arm {control!r}, which gets {starts} in this design: give it 2 or more (blocks or "
            "starts_per_arm), or fix the floor (a number)",
        )


def check_sets(rule: FidelityRule, refusals: Refusals) -> None:
    """Every set resolves and checks (registration calls this before anything runs)."""
    from frank.fidelity.sets import load_set, resolve_set

    for i, spec in enumerate(rule.sets):
        try:
            load_set(resolve_set(spec))
        except FrankError as exc:
            refusals.add(("fidelity", "sets", i), str(exc))


# -- in a cell ------------------------------------------------------------------------------------------


class CellFidelity(TypedDict):
    """What a cell keeps of the fidelity rule's measure (its result's `fidelity`, in the journal)."""

    sets: dict[str, dict[str, Any]]  # per set as the design names it: name, kl, positions, hashes, ...
    candidate: NotRequired[str]  # the .npz of the engine's own top k (CANDIDATE_FILE)
    unavailable: NotRequired[str]  # why this start has no KL (an engine that cannot be measured)


def measure_cell(rule: FidelityRule, cell_dir: Path | str, controller=None) -> CellFidelity:
    """Measure the running engine (the cell's) over the rule's sets; keep its top-k in the cell folder.
    Returns {"sets": {spec: {name, kl, positions, misses, set_sha256, reference_sha256, reference_floor}},
    "candidate": path}, keyed by each set as the design names it: put it in the cell's result under
    "fidelity". With `reference = "control"`: {spec: {name, kl: None, positions, documents, set_sha256,
    tokens_sha256}} (the KL is computed at evaluation, against a control start)."""
    from frank.fidelity.runs import measure_target, running_target

    path = Path(cell_dir) / CANDIDATE_FILE
    if rule.reference == "control":
        from frank.fidelity.control import measure_engine

        own = measure_engine(running_target(controller, reference=False), rule.sets)
        save_candidates(path, {spec: cand for spec, (_, cand) in zip(rule.sets, own)})
        return {"sets": {spec: entry for spec, (entry, _) in zip(rule.sets, own)}, "candidate": str(path)}
    measured = measure_target(running_target(controller), rule.sets)
    save_candidates(path, {spec: cand for spec, (_, cand) in zip(rule.sets, measured)})
    return {
        "sets": {
            spec: {
                "name": entry["name"],
                "kl": entry["kl"],
                "positions": entry["positions"],
                "misses": entry["misses"],
                "set_sha256": entry["set_sha256"],
                "reference_sha256": entry["reference_sha256"],
                "reference_floor": entry["floor"]["reference"],
            }
            for spec, (entry, _) in zip(rule.sets, measured)
        },
        "candidate": str(path),
    }


def save_candidates(path: Path, candidates: dict[str, list[dict[int, float]]]) -> None:
    """One .npz for a start: per set (in order, names in `names`) its token IDs and log-probabilities,
    padded with -1 / -inf (positions return k or k + 1 tokens)."""
    arrays: dict[str, np.ndarray] = {"names": np.array(list(candidates), dtype=str)}
    for n, (_name, cand) in enumerate(candidates.items()):
        width = max(len(row) for row in cand)
        ids = np.full((len(cand), width), -1, dtype=np.int64)
        lps = np.full((len(cand), width), -np.inf, dtype=np.float64)
        for i, row in enumerate(cand):
            ids[i, : len(row)] = list(row.keys())
            lps[i, : len(row)] = list(row.values())
        arrays[f"set{n}_ids"], arrays[f"set{n}_logprobs"] = ids, lps
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.chmod(0o600)
    tmp.replace(path)


def load_candidate(path: Path | str, name: str) -> list[dict[int, float]]:
    with np.load(path) as data:
        names = data["names"].tolist()
        if name not in names:
            raise FrankError(f"{path}: no set {name!r} (sets: {', '.join(names)})")
        n = names.index(name)
        ids, lps = data[f"set{n}_ids"], data[f"set{n}_logprobs"]
    return [{int(t): float(v) for t, v in zip(r_ids, r_lps) if t >= 0} for r_ids, r_lps in zip(ids, lps)]


def engine_floor_between(first: Path | str, second: Path | str, name: str, k: int = 64) -> float:
    """KL of the second start against the first start's own top k, for one set."""
    from frank.fidelity.candidate import top_k_arrays
    from frank.fidelity.measure import mean_kl

    ids, lps = top_k_arrays(load_candidate(first, name), k)
    return mean_kl(ids, lps, load_candidate(second, name)).kl


# -- evaluation -----------------------------------------------------------------------------------------


class FidelityResult(TypedDict):
    """The fidelity rule evaluated over a run's starts (a report's `fidelity`)."""

    status: str  # pass | fail | unchecked
    detail: str
    sets: list[dict[str, Any]]  # per set: name, treatment, control (mean KL), floor, floor_parts, met, ...
    floor_rule: str | float
    reference: str  # one of REFERENCES
    notes: list[str]
    reference_start: NotRequired[int | None]  # with the control as reference: the start it was
    mismatched: NotRequired[list[dict[str, Any]]]  # starts that scored other token IDs than the reference
    per_start: NotRequired[list[dict[str, Any]]]  # each start's KL against the reference start
    unavailable: NotRequired[list[dict[str, Any]]]  # starts with no KL, and why (set by the report)


@dataclass(frozen=True)
class StartFidelity:
    start: int
    arm: str
    sets: dict[str, dict[str, Any]]  # name -> {"kl", "reference_floor"?, "tokens_sha256"?, ...}
    candidate: str | None = None


def evaluate(
    rule: FidelityRule,
    starts: Iterable[StartFidelity],
    treatment: str,
    control: str,
    profile: str = "",
    control_knobs: dict[str, Any] | None = None,
    floors: dict[str, float] | None = None,
    relative: Any = None,
) -> FidelityResult:
    """Per set: each arm's mean KL, the floor and whether the rule holds. `floors` (name -> KL) are floors
    measured elsewhere (results CSV rows). With `reference = "control"`, `relative` is the starts' KL
    against the reference start (frank.experiments.fidelity_control.against_control, which the caller
    runs: that module builds on this one). Returns {"status": pass|fail|unchecked, "sets": [...], "notes"}."""
    measured = sorted(starts, key=lambda s: s.start)
    notes: list[str] = []
    if rule.reference == "control" and relative is None:
        raise ValueError("a control-reference fidelity rule needs the starts' KL against the reference start")
    scored = relative.starts if relative else measured
    rows, failed, missing = [], [], []
    controls = [s for s in measured if s.arm == control]
    for name in rule.sets:
        per_arm = {
            arm: [s.sets[name]["kl"] for s in scored if s.arm == arm and s.sets.get(name, {}).get("kl") is not None]
            for arm in (treatment, control)
        }
        t_kl = mean(per_arm[treatment]) if per_arm[treatment] else None
        c_kl = mean(per_arm[control]) if per_arm[control] else None
        if relative is not None:
            floor, parts = relative.floor(rule, name, floors, notes)
        else:
            floor, parts = _floor(rule, name, measured, controls, profile, control_knobs, floors, notes)
        met = None if t_kl is None or c_kl is None or floor is None else t_kl <= c_kl + floor
        if met is None:
            missing.append(name)
        elif not met:
            failed.append(name)
        rows.append(
            {
                "name": name,
                "treatment": t_kl,
                "control": c_kl,
                "floor": floor,
                "floor_parts": parts,
                "difference": None if t_kl is None or c_kl is None else t_kl - c_kl,
                "met": met,
                "starts": {arm: len(v) for arm, v in per_arm.items()},
                **({"reference_start": relative.reference.get(name)} if relative else {}),
            }
        )
    mismatched = relative.mismatched if relative else []
    status = "fail" if failed or mismatched else ("unchecked" if missing else "pass")
    detail = "; ".join(
        ([f"KL above control + floor for: {', '.join(failed)}"] if failed else [])
        + ([f"not the reference's tokens: {'; '.join(m['detail'] for m in mismatched)}"] if mismatched else [])
    ) or (
        f"no fidelity measured for: {', '.join(missing)}"
        if missing
        else f"{treatment} no worse than {control} by more than the floor on all {len(rows)} sets"
    )
    if relative is None:
        return FidelityResult(
            status=status,
            detail=detail,
            sets=rows,
            floor_rule=rule.floor,
            reference=rule.reference,
            notes=sorted(set(notes)),
        )
    return FidelityResult(  # the keys in the order report --json has always had them
        status=status,
        detail=detail,
        sets=rows,
        floor_rule=rule.floor,
        reference=rule.reference,
        reference_start=relative.reference_start,
        mismatched=mismatched,
        per_start=relative.per_start,
        notes=sorted(set(notes + relative.notes)),
    )


def _floor(
    rule: FidelityRule,
    name: str,
    starts: list[StartFidelity],
    controls: list[StartFidelity],
    profile: str,
    control_knobs: dict[str, Any] | None,
    floors: dict[str, float] | None,
    notes: list[str],
) -> tuple[float | None, dict[str, Any]]:
    if rule.floor != FLOOR_MEASURED:
        return float(rule.floor), {"fixed": float(rule.floor)}
    parts: dict[str, Any] = {}
    ref = [s.sets[name].get("reference_floor") for s in starts if name in s.sets]
    ref = [r for r in ref if r is not None]
    if ref:
        parts["reference"] = max(ref)
    with_files = [s for s in controls if s.candidate and Path(s.candidate).is_file() and name in s.sets]
    if len(with_files) >= 2:
        parts["engine"] = engine_floor_between(with_files[0].candidate, with_files[1].candidate, name)
        parts["engine_source"] = f"control starts {with_files[0].start} and {with_files[1].start}"
    elif floors and name in floors:
        parts["engine"] = floors[name]
        parts["engine_source"] = "results rows"
    else:
        known = _saved_floor(profile, control_knobs, name, starts)
        if known is not None:
            parts["engine"], parts["engine_source"] = known[0], f"fidelity floor run {known[1]}"
        else:
            notes.append(
                f"no engine floor for {name}: fewer than 2 control starts and no `frank fidelity floor` "
                f"run of the control's configuration; the reference floor alone"
            )
    values = [v for k, v in parts.items() if k in ("reference", "engine")]
    return (max(values) if values else None), parts


def _saved_floor(
    profile: str, knobs: dict[str, Any] | None, name: str, starts: list[StartFidelity]
) -> tuple[float, str] | None:
    if not profile or knobs is None:
        return None
    from frank.engine.profiles import load_profile
    from frank.fidelity.reference import model_fingerprint
    from frank.fidelity.runs import known_engine_floor

    shas = {s.sets[name].get("set_sha256") for s in starts if name in s.sets} - {None}
    if len(shas) != 1:
        return None
    try:
        prof = load_profile(profile)
        numeric = {k: v for k, v in sorted(prof.resolve_knobs(knobs).items()) if prof.knobs[k].needs_restart}
        return known_engine_floor(profile, numeric, model_fingerprint(prof.model_path()), shas.pop())
    except FrankError:
        return None
