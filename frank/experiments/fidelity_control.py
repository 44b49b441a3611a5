"""The fidelity rule with the control as reference (`[fidelity] reference = "control"`), for a model that has
no reference checkpoint: one control start's top k stands as the reference of every other start.

Per set the reference is the first control start (lowest start) with a candidate file; every other start's KL
is against its own top 64 (the engine floor's measure, frank.fidelity.measure.mean_kl); the control's mean
is over the control starts other than the reference, and a measured floor is the second control start's KL
(the engine floor; there is no reference floor). A start whose scored token IDs (`tokens_sha256`,
frank.fidelity.control) differ from the reference start's is named and fails the rule: it cannot pass by
measuring other text. What this measures is a part's effect on the distribution relative to the control
configuration, not the distance from the checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frank.experiments.fidelity import FLOOR_MEASURED, FidelityResult, FidelityRule, StartFidelity, load_candidate


@dataclass(frozen=True)
class ControlKL:
    """Every start's KL against the reference start's own top k (`against_control`)."""

    starts: list[StartFidelity]  # as given, each set's "kl" against the reference start (the reference: none)
    reference: dict[str, int | None]  # set -> the reference start (None: KL from results rows, or too few)
    mismatched: list[dict[str, Any]]  # {"set", "start", "detail"}: scored other token IDs than the reference
    engine_floor: dict[str, tuple[float, str]]  # set -> (KL of the second control start, its source)
    notes: list[str]

    @property
    def reference_start(self) -> int | None:
        known = {v for v in self.reference.values() if v is not None}
        return known.pop() if len(known) == 1 else None

    def floor(
        self, rule: FidelityRule, name: str, floors: dict[str, float] | None, notes: list[str]
    ) -> tuple[float | None, dict[str, Any]]:
        """A set's floor with the control as reference: fixed, or the engine floor (no reference floor exists):
        the second control start's KL against the first, else a `fidelity_floor:SET` row."""
        if rule.floor != FLOOR_MEASURED:
            return float(rule.floor), {"fixed": float(rule.floor)}
        if name in self.engine_floor:
            value, source = self.engine_floor[name]
            return value, {"engine": value, "engine_source": source}
        if floors and name in floors:
            return floors[name], {"engine": floors[name], "engine_source": "results rows"}
        notes.append(f"no engine floor for {name}: fewer than 2 control starts measured the reference's tokens")
        return None, {}

    @property
    def per_start(self) -> list[dict[str, Any]]:
        return [
            {"start": s.start, "arm": s.arm, "set": name, "kl": entry["kl"]}
            for s in self.starts
            for name, entry in s.sets.items()
            if entry.get("kl") is not None
        ]


def against_control(rule: FidelityRule, starts: list[StartFidelity], control: str, k: int = 64) -> ControlKL:
    """`reference = "control"`: per set, the first control start (lowest start) with a candidate file is the
    reference; every other start with a file gets its KL against that start's own top k, provided it scored
    the same token IDs (`tokens_sha256`); one that did not is named in `mismatched` (the rule fails). Starts
    without files (results rows) keep the KL they carry, already relative to the run's reference start."""
    from frank.fidelity.candidate import top_k_arrays
    from frank.fidelity.measure import mean_kl

    sets_of = [dict(s.sets) for s in starts]
    reference: dict[str, int | None] = {}
    mismatched: list[dict[str, Any]] = []
    floors: dict[str, tuple[float, str]] = {}
    notes: list[str] = []
    for name in rule.sets:
        files = [i for i, s in enumerate(starts) if name in s.sets and s.candidate and Path(s.candidate).is_file()]
        reference[name] = None
        if not files:
            if any(s.sets.get(name, {}).get("kl") is not None for s in starts):
                notes.append(f"{name}: each start's KL from results rows (against the run's reference start)")
            continue
        for i, s in enumerate(starts):  # from cells, every KL is computed here: none is taken as given
            if name in s.sets:
                sets_of[i][name] = {**s.sets[name], "kl": None}
                if i not in files:
                    notes.append(f"{name}: start {s.start} ({s.arm}) has no candidate file: no KL")
        ctrl = [i for i in files if starts[i].arm == control]
        if len(ctrl) < 2:
            notes.append(
                f"{name}: {len(ctrl)} control start(s) with a candidate file; the control as reference needs 2 "
                "(the first is the reference, the others give the control's KL)"
            )
            continue
        ref = starts[ctrl[0]]
        reference[name] = ref.start
        del sets_of[ctrl[0]][name]
        want = ref.sets[name].get("tokens_sha256")
        if not want:
            detail = f"the reference start {ref.start} ({ref.arm}) recorded no token IDs for {name}"
            mismatched.append({"set": name, "start": ref.start, "detail": detail})
            continue
        ids, lps = top_k_arrays(load_candidate(ref.candidate, name), k)
        for i in files:
            s = starts[i]
            if i == ctrl[0]:
                continue
            if s.sets[name].get("tokens_sha256") != want:
                detail = f"start {s.start} ({s.arm}) scored other token IDs than start {ref.start} on {name}"
                mismatched.append({"set": name, "start": s.start, "detail": detail})
                continue
            try:
                sets_of[i][name]["kl"] = mean_kl(ids, lps, load_candidate(s.candidate, name)).kl
            except ValueError as exc:  # the same IDs, another number of positions: not a measure of them
                mismatched.append(
                    {"set": name, "start": s.start, "detail": f"start {s.start} ({s.arm}) on {name}: {exc}"}
                )
                continue
            if i == ctrl[1]:
                floors[name] = (sets_of[i][name]["kl"], f"control starts {ref.start} and {s.start}")
    scored = [StartFidelity(s.start, s.arm, sets, s.candidate) for s, sets in zip(starts, sets_of)]
    return ControlKL(scored, reference, mismatched, floors, notes)


def control_reference(fid: FidelityResult) -> str:
    """A report's words for which start the control-as-reference rule measured every other start against."""
    start = fid.get("reference_start")
    if start is None:
        return "the control's first start (no start with a candidate file here: KL from results rows, or too few)"
    return f"control start {start} (its own top 64; the control's KL is over its other starts)"
