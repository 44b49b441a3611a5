"""Analysis under the frozen rule: effect per block in %, exact p-value, decision, revert rule, guards.

One function, `analyze`, works on observations (start order, block, arm, value), whether they come from a
run's journal (`report_for_run`) or from measures taken elsewhere (`read_results_csv`, for
`frank experiment analyze DESIGN.toml RESULTS.csv`). The effect of a block is the treatment's value
against the control's: (treatment - control) / control, in percent.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

from frank.errors import FrankError
from frank.experiments import exact, stopping
from frank.experiments.decision import Guard, Revert, decide
from frank.experiments.design import Design
from frank.experiments.journal import fold, read_events
from frank.experiments.tally import by_block, effect_pct, tally_blocks


@dataclass(frozen=True)
class Observation:
    start: int  # 1-based start order
    block: int | None
    arm: str
    value: float
    measure: str = ""
    failed_requests: int | None = None
    prompt_hashes: dict[str, str | None] | None = None
    checks: dict[str, bool] = field(default_factory=dict)
    output_hashes: dict[str, str | None] | None = None
    fidelity: dict[str, Any] | None = None  # a cell's fidelity result (frank/experiments/fidelity.py)
    failures: tuple[str, ...] = ()  # the engine's own words for the start's first failed requests


class ResultsError(FrankError):
    pass


# -- CSV ----------------------------------------------------------------------------------------------

_COLUMNS = {
    "start_order": "start",
    "start order": "start",
    "start": "start",
    "order": "start",
    "block": "block",
    "arm": "arm",
    "value": "value",
    "measure": "measure",
    "failed_requests": "failed_requests",
    "prompt_ids_sha256": "prompt_ids_sha256",
}
ALL_PROMPTS = "every request (one digest per start)"  # the key of a CSV row's prompt-ID digest


def prompt_ids_digest(hashes: dict[str, str | None] | None) -> str:
    """One sha256 over a start's per-request prompt-ID hashes ("draw/id hash" lines, sorted), so a results
    CSV carries what the prompt-IDs guard compares; empty when a request has none (the guard then says
    unchecked, never pass)."""
    if not hashes or any(not h for h in hashes.values()):
        return ""
    lines = "".join(f"{k} {hashes[k]}\n" for k in sorted(hashes))
    return hashlib.sha256(lines.encode()).hexdigest()


PROVENANCE_KEYS = ("run", "design", "design-sha256")  # `# key: value` comment lines of an exported run


def results_provenance(text: str) -> dict[str, tuple[int, str]]:
    """The `# run: ...`, `# design: ...`, `# design-sha256: ...` comments of a results CSV: key -> (line,
    value). Written by `frank experiment report RUN --csv`; absent from measures taken elsewhere."""
    out: dict[str, tuple[int, str]] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped.startswith("#"):
            continue
        key, sep, value = stripped[1:].strip().partition(":")
        if sep and key.strip() in PROVENANCE_KEYS and key.strip() not in out:
            out[key.strip()] = (n, value.strip())
    return out


def read_results_csv(path: Path | str, design: Design) -> list[Observation]:
    """Rows: start order, block, arm, value (and `measure` for a criteria design). `#` lines are comments;
    a `# design-sha256: HEX` comment (an exported registered run) must name this design."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror}") from None
    stated = results_provenance(text).get("design-sha256")
    if stated and stated[1] != design.sha256:
        raise ResultsError(
            f"{path}:{stated[0]}: design-sha256 {stated[1][:12]}… is not the design's ({design.name}, "
            f"{design.sha256[:12]}…): these results are of another design"
        )
    lines = [
        (n, line)
        for n, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        raise ResultsError(f"{path}: no header and no rows")
    header_no, header = lines[0]
    names = next(csv.reader(io.StringIO(header)))
    columns = {}
    for i, raw in enumerate(names):
        key = _COLUMNS.get(raw.strip().lower())
        if key is None:
            raise ResultsError(
                f"{path}:{header_no}: unknown column {raw.strip()!r} "
                f"(columns: start_order, block, arm, value[, measure, failed_requests, prompt_ids_sha256])"
            )
        columns[key] = i
    needed = ["start", "arm", "value"] + (["measure"] if design.kind == "external" else [])
    if design.kind == "blocks":
        needed.append("block")
    for key in needed:
        if key not in columns:
            raise ResultsError(f"{path}:{header_no}: missing column {key if key != 'start' else 'start_order'!r}")
    arms = {a.name for a in design.arms}
    out: list[Observation] = []
    for number, line in lines[1:]:
        row = next(csv.reader(io.StringIO(line)))
        where = f"{path}:{number}"
        if len(row) != len(names):
            raise ResultsError(f"{where}: expected {len(names)} fields, got {len(row)}")

        def get(key: str, row: list[str] = row) -> str:
            return row[columns[key]].strip() if key in columns else ""

        arm = get("arm")
        if arm not in arms:
            raise ResultsError(f"{where}: arm: {arm!r} is not an arm of the design ({', '.join(sorted(arms))})")
        try:
            start = int(get("start")) if get("start") else 0
        except ValueError:
            raise ResultsError(f"{where}: start_order: {get('start')!r} is not a whole number") from None
        try:
            block = int(get("block")) if get("block") else None
        except ValueError:
            raise ResultsError(f"{where}: block: {get('block')!r} is not a whole number") from None
        try:
            value = float(get("value"))
        except ValueError:
            raise ResultsError(f"{where}: value: {get('value')!r} is not a number") from None
        if math.isnan(value) or math.isinf(value):
            raise ResultsError(f"{where}: value: {get('value')!r} is not a finite number")
        measure = get("measure")
        # a start's KL or a floor (`fidelity:SET`, `fidelity_floor:SET`) is named by its start, not a block
        if design.kind == "blocks" and not measure.startswith(("fidelity:", "fidelity_floor:")):
            if block is None or not 1 <= block <= int(design.blocks or 0):
                raise ResultsError(f"{where}: block: {get('block')!r} is not a block of 1..{design.blocks}")
            if any(o.block == block and o.arm == arm and o.measure == measure for o in out):
                raise ResultsError(f"{where}: block {block} has a second row for arm {arm!r}")
        failed = get("failed_requests")
        if failed and not failed.isdigit():
            raise ResultsError(f"{where}: failed_requests: {failed!r} is not a whole number")
        digest = get("prompt_ids_sha256")
        if digest and not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise ResultsError(f"{where}: prompt_ids_sha256: {digest[:20]!r} is not a sha256 (64 hex digits)")
        out.append(
            Observation(
                start=start,
                block=block,
                arm=arm,
                value=value,
                measure=measure,
                failed_requests=int(failed) if failed else None,
                prompt_hashes={ALL_PROMPTS: digest} if "prompt_ids_sha256" in columns else None,
            )
        )
    # one value per start and measure (a criteria design has a row per criterion's measure of each start)
    seen: set[tuple[int, str]] = set()
    for o in out:
        if not o.start or o.measure.startswith(("check:", "fidelity:", "fidelity_floor:")):
            continue
        if design.kind != "external" and (o.start, o.measure) in seen:
            what = f"start {o.start}" + (f", measure {o.measure}" if o.measure else "")
            raise ResultsError(f"{path}: start_order: {what} appears twice")
        seen.add((o.start, o.measure))
    return out


# -- analysis -----------------------------------------------------------------------------------------


def analyze(
    design: Design,
    observations: Iterable[Observation],
    *,
    source: str = "run",
    order: list[dict[str, Any]] | None = None,
    failed_attempts: dict[str, int] | None = None,
    voided: Iterable[int] = (),
) -> dict[str, Any]:
    obs = sorted(observations, key=lambda o: o.start or 0)
    rule = design.rule
    checks = [o for o in obs if o.measure.startswith("check:")]
    fidelity_rows = [o for o in obs if o.measure.startswith(("fidelity:", "fidelity_floor:"))]
    obs = [o for o in obs if not o.measure.startswith(("check:", "fidelity:", "fidelity_floor:"))]
    out: dict[str, Any] = {
        "name": design.name,
        "question": design.question,
        "kind": design.kind,
        "source": source,
        "design_sha256": design.sha256,
        "measure": design.measure,
        "test": rule.test,
        "treatment": rule.treatment,
        "control": rule.control,
        "direction": rule.direction or None,
        "alpha": rule.alpha,
        "require_all": rule.require_all if rule.test == "sign" else None,
        "order": order
        if order is not None
        else [{"start": o.start, "block": o.block, "arm": o.arm} for o in obs if o.start],
        "null_size": exact.null_size(design),
        "smallest_p": exact.smallest_p(design),
        "p_value": None,
        "p_fraction": None,
        "notes": [],
    }
    if rule.test == "criteria":  # external, or live episode starts (the seed's adoption rule)
        rule_decision = _criteria(design, obs, out)
    elif design.kind == "blocks":
        rule_decision = _blocks(design, obs, set(voided), out)
    else:
        rule_decision = _balanced(design, obs, out)
    guards = _guards(design, obs, checks, source)
    if design.fidelity is not None:
        out["fidelity"] = _fidelity(design, obs, fidelity_rows)
        guards.append(Guard("fidelity", out["fidelity"]["status"], out["fidelity"]["detail"]))
    out["guards"] = [asdict(g) for g in guards]
    verdict, reason = rule_decision
    decision = decide(
        # the rule helpers return (verdict, reason) as plain strings: a Verdict by construction
        verdict,  # type: ignore[arg-type]
        reason,
        guards,
        out.get("fidelity"),
        design_sha256=design.sha256,
        p_value=out.get("p_value"),
        p_fraction=out.get("p_fraction"),
        mean_effect_pct=out.get("mean_effect_pct"),
    )
    unchecked = [g.name for g in guards if g.status == "unchecked"]
    if unchecked:
        out["notes"].append(f"guards not checked here: {', '.join(unchecked)}")
    if source == "external" and design.kind != "external":
        out["notes"].append("a randomization p-value only if the order was drawn uniformly before the starts")
    out["decision"], out["decision_reason"] = decision.verdict, decision.reason
    revert = _revert(design, obs, out, failed_attempts, source)
    out["revert"] = None
    if revert is not None:
        out["revert"] = {
            "description": revert.description,
            "outcome": revert.outcome,
            "triggers": list(revert.triggers),
            "unchecked": list(revert.unchecked),
        }
    return out


def _blocks(design: Design, obs: list[Observation], voided: set[int], out: dict[str, Any]) -> tuple[str, str]:
    rule = design.rule
    k = int(design.blocks or 0)
    tally = tally_blocks(design, by_block((o.block, o.arm, o.value) for o in obs), voided)
    w, complete, missing = tally.wins, tally.complete, tally.missing
    tested = tally.test
    out.update(
        blocks=[
            {"block": b.block, "values": b.values, "voided": b.voided, "effect_pct": b.effect_pct, "sign": b.sign}
            for b in tally.blocks
        ],
        wins=tally.wins,
        losses=tally.losses,
        ties=tally.ties,
        complete_blocks=complete,
        voided_blocks=list(tally.voided),
        mean_effect_pct=tally.mean_effect_pct,
        p_value=tested.p_value if tested else None,
        p_fraction=exact.fraction(tested.p_value, tested.null_size) if tested else None,
        tested_null_size=tested.null_size if tested else None,
    )
    word = "lower" if rule.direction == "lower" else "higher"
    if missing > 0:
        stop = stopping.blocks_stop(design, tally)
        if stop is not None:  # the p is the finished blocks' (set above)
            out["stopped_when_decided"] = stop.to_json()
            return stop.verdict, stop.summary()
        return "incomplete", f"{missing} of {k} blocks not measured yet"
    res = tested or exact.sign_test(0, 0)  # every block voided: nothing tested, p = 1
    reasons = []
    if rule.require_all and w < k:
        reasons.append(f"{rule.treatment} was {word} in {w} of {k} blocks, the rule needs all {k}")
    if rule.alpha is not None and res.p_value > rule.alpha:
        reasons.append(f"p = {exact.fraction(res.p_value, res.null_size)} > alpha {rule.alpha:g}")
    if reasons:
        return "not confirmed", "; ".join(reasons)
    return "confirmed", (
        f"{rule.treatment} {word} in {w} of {k} blocks; one-sided exact sign test "
        f"p = {exact.fraction(res.p_value, res.null_size)}"
    )


def _balanced(design: Design, obs: list[Observation], out: dict[str, Any]) -> tuple[str, str]:
    rule = design.rule
    n = int(design.starts_per_arm or 0)
    tvals = [o.value for o in obs if o.arm == rule.treatment]
    cvals = [o.value for o in obs if o.arm == rule.control]
    out["starts"] = [{"start": o.start, "arm": o.arm, "value": o.value} for o in obs]
    out["arm_means"] = {rule.treatment: mean(tvals) if tvals else None, rule.control: mean(cvals) if cvals else None}
    if tvals and cvals:
        out["mean_difference"] = mean(tvals) - mean(cvals)
        out["mean_effect_pct"] = effect_pct(mean(tvals), mean(cvals))
        out["ratio_of_means"] = mean(cvals) / mean(tvals) if mean(tvals) else None  # control / treatment
        below = all(tv < cv for tv in tvals for cv in cvals)
        above = all(tv > cv for tv in tvals for cv in cvals)
        out["separated"] = below if rule.direction == "lower" else above
    if len(tvals) < n or len(cvals) < n:
        stop = stopping.balanced_stop(design, [(o.start or 0, o.arm, o.value) for o in obs])
        if stop is not None:  # the p is the finished starts'
            res = exact.permutation_test(tvals, cvals, rule.direction)
            out.update(
                p_value=res.p_value,
                p_fraction=exact.fraction(res.p_value, res.null_size),
                tested_null_size=res.null_size,
            )
            out["stopped_when_decided"] = stop.to_json()
            return stop.verdict, stop.summary()
        return (
            "incomplete",
            f"{len(tvals)} of {n} {rule.treatment} and {len(cvals)} of {n} {rule.control} starts measured",
        )
    if len(tvals) != n or len(cvals) != n:
        raise ResultsError(f"the design has {n} starts per arm; the results have {len(tvals)} and {len(cvals)}")
    res = exact.permutation_test(tvals, cvals, rule.direction)
    frac = exact.fraction(res.p_value, res.null_size)
    out.update(p_value=res.p_value, p_fraction=frac, tested_null_size=res.null_size)
    assert rule.alpha is not None
    if res.p_value <= rule.alpha:
        return "confirmed", f"one-sided exact permutation test p = {frac} <= alpha {rule.alpha:g}"
    return "not confirmed", f"one-sided exact permutation test p = {frac} > alpha {rule.alpha:g}"


_COMPARE_TEXT = {
    "lower": "lower than",
    "higher": "higher than",
    "not_higher": "no higher than",
    "not_lower": "no lower than",
}


def _criteria(design: Design, obs: list[Observation], out: dict[str, Any]) -> tuple[str, str]:
    rule = design.rule
    results, missing, failed = [], [], []
    for c in rule.criteria:
        per_arm = {}
        for arm in (rule.treatment, rule.control):
            vals = [o.value for o in obs if o.measure == c.measure and o.arm == arm]
            per_arm[arm] = (sum(vals) if c.aggregate == "sum" else mean(vals)) if vals else None
        tv, cv = per_arm[rule.treatment], per_arm[rule.control]
        met = None
        if tv is not None and cv is not None:
            met = {
                "lower": tv < cv,
                "higher": tv > cv,
                "not_higher": tv <= cv + c.margin,
                "not_lower": tv >= cv - c.margin,
            }[c.compare]
        else:
            missing.append(c.measure)
        if met is False:
            failed.append(c.measure)
        results.append(
            {
                "measure": c.measure,
                "aggregate": c.aggregate,
                "compare": c.compare,
                "margin": c.margin,
                "treatment": tv,
                "control": cv,
                "met": met,
                "text": f"{c.aggregate} of {c.measure}: {rule.treatment} {_COMPARE_TEXT[c.compare]} "
                f"{rule.control}"
                + (f" - {c.margin:g}" if c.compare == "not_lower" and c.margin else "")
                + (f" + {c.margin:g}" if c.compare == "not_higher" and c.margin else ""),
            }
        )
    out["criteria"] = results
    out["starts"] = [{"start": o.start, "arm": o.arm, "measure": o.measure, "value": o.value} for o in obs]
    out["notes"].append("a decision rule, not a randomized comparison: no p-value")
    if missing:
        return "incomplete", f"no values for: {', '.join(missing)}"
    if failed:
        return "not confirmed", f"criteria not met: {', '.join(failed)}"
    return "confirmed", f"all {len(results)} criteria met"


def _guards(design: Design, obs: list[Observation], checks: list[Observation], source: str) -> list[Guard]:
    g = design.guards
    out = []
    if g.no_failed_requests:
        counts = [o.failed_requests for o in obs]
        if not obs or any(c is None for c in counts):
            elsewhere = ": measures taken elsewhere" if source == "external" else ""
            out.append(Guard("no_failed_requests", "unchecked", "no per-request records" + elsewhere))
        else:
            total = sum(c or 0 for c in counts)
            starts = len({o.start for o in obs}) if all(o.start for o in obs) else len(obs)
            out.append(
                Guard(
                    "no_failed_requests",
                    "pass" if total == 0 else "fail",
                    f"{total} failed requests over {starts} starts"
                    + "".join(f"; start {o.start}: {msg}" for o in obs for msg in o.failures),
                )
            )
    if g.prompt_token_ids_identical:
        out.append(_identical_prompts(obs, source))
    if g.outputs_identical:
        out.append(_identical_outputs(obs, source))
    for name in g.checks:
        rows = [c for c in checks if c.measure == f"check:{name}"]
        if not rows:
            out.append(Guard(name, "unchecked", "no outcome recorded"))
        else:
            bad = [c for c in rows if c.value != 1]
            out.append(Guard(name, "pass" if not bad else "fail", f"{len(rows) - len(bad)} of {len(rows)} passed"))
    return out


def _fidelity(design: Design, obs: list[Observation], rows: list[Observation]) -> dict[str, Any]:
    """The fidelity rule over the starts' measured KL (cells) or `fidelity:SET` rows (results CSV)."""
    from frank.experiments.fidelity import StartFidelity, evaluate

    assert design.fidelity is not None
    starts = [
        StartFidelity(o.start, o.arm, o.fidelity.get("sets", {}), o.fidelity.get("candidate"))
        for o in obs
        if o.fidelity
    ]
    by_start: dict[tuple[int, str], dict[str, dict[str, Any]]] = {}
    floors: dict[str, float] = {}
    for row in rows:
        kind, _, name = row.measure.partition(":")
        if kind == "fidelity_floor":
            floors[name] = max(floors.get(name, 0.0), row.value)
        else:
            by_start.setdefault((row.start, row.arm), {})[name] = {"kl": row.value}
    starts += [StartFidelity(start, arm, sets) for (start, arm), sets in by_start.items()]
    control = design.arm(design.rule.control)
    relative = None
    if design.fidelity.reference == "control":
        from frank.experiments.fidelity_control import against_control

        relative = against_control(design.fidelity, sorted(starts, key=lambda s: s.start), design.rule.control)
    result = evaluate(
        design.fidelity,
        starts,
        design.rule.treatment,
        design.rule.control,
        profile=control.profile,
        control_knobs=control.knob_dict,
        floors=floors or None,
        relative=relative,
    )
    unavailable = [
        {"start": o.start, "arm": o.arm, "reason": o.fidelity["unavailable"]}
        for o in obs
        if o.fidelity and o.fidelity.get("unavailable")
    ]
    if unavailable:
        result["unavailable"] = unavailable
        if result["status"] == "unchecked":
            result["detail"] = "no KL measured in " + "; ".join(
                f"start {u['start']} ({u['arm']}): {u['reason']}" for u in unavailable
            )
    return result


def _identical_prompts(obs: list[Observation], source: str) -> Guard:
    return _identical_hashes("prompt_token_ids_identical", "prompt token IDs", [o.prompt_hashes for o in obs], source)


def _identical_outputs(obs: list[Observation], source: str) -> Guard:
    return _identical_hashes("outputs_identical", "outputs", [o.output_hashes for o in obs], source)


def _identical_hashes(name: str, what: str, per_start: list[dict[str, str | None] | None], source: str) -> Guard:
    """Every request's hash the same in every start (a request's hash: its prompt IDs, or its outputs)."""
    if not per_start or any(h is None for h in per_start):
        return Guard(
            name, "unchecked", f"no {what} hashes" + (": measures taken elsewhere" if source == "external" else "")
        )
    keys = set().union(*(h or {} for h in per_start))
    missing = sum(1 for h in per_start for k in keys if not (h or {}).get(k))
    if missing:
        return Guard(name, "unchecked", f"the engine gave no {what} for {missing} request(s)")
    differ = [k for k in sorted(keys) if len({(h or {})[k] for h in per_start}) > 1]
    if differ:
        return Guard(
            name,
            "fail",
            f"{len(differ)} of {len(keys)} requests had different {what} across starts (first: {differ[0]})",
        )
    counted = "the digest of every request's" if keys == {ALL_PROMPTS} else f"{len(keys)} requests'"
    return Guard(name, "pass", f"{counted} {what} identical in all {len(per_start)} starts")


def _revert(
    design: Design, obs: list[Observation], out: dict[str, Any], failed_attempts: dict[str, int] | None, source: str
) -> Revert | None:
    rv = design.revert
    if rv is None:
        return None
    rule = design.rule
    triggers, unchecked = [], []
    if rv.treatment_only_failures:
        per_arm = {}
        for arm in (rule.treatment, rule.control):
            counts = [o.failed_requests for o in obs if o.arm == arm]
            if failed_attempts is None or any(c is None for c in counts):
                per_arm[arm] = None
            else:
                per_arm[arm] = sum(c or 0 for c in counts) + failed_attempts.get(arm, 0)
        if None in per_arm.values():
            unchecked.append(
                "treatment_only_failures: no failure records"
                + (", measures taken elsewhere" if source == "external" else "")
            )
        elif per_arm[rule.treatment] and not per_arm[rule.control]:
            triggers.append(f"{per_arm[rule.treatment]} failure(s) only in {rule.treatment}")
    if rv.max_worse_pct is not None:
        eff = out.get("mean_effect_pct")
        if eff is None:
            unchecked.append("max_worse_pct: no effect measured")
        else:
            worse = eff if rule.direction == "lower" else -eff
            if worse > rv.max_worse_pct:
                triggers.append(f"mean effect {eff:+.2f}% is worse than the {rv.max_worse_pct:g}% limit")
    if rv.fidelity_regression:
        fid = out.get("fidelity") or {}
        if fid.get("status") == "fail":
            triggers.append(f"fidelity regression: {fid['detail']}")
        elif fid.get("status") != "pass":
            unchecked.append("fidelity_regression: " + (fid.get("detail") or "no fidelity measured"))
    outcome = "revert" if triggers else ("unchecked" if unchecked else "keep")
    return Revert(outcome, rv.description, tuple(triggers), tuple(unchecked))


# -- from a run's journal -------------------------------------------------------------------------------


def run_observations(run: Any, progress: Any = None) -> tuple[list[Observation], dict[str, int], Any]:
    """(observations, failed attempts per arm, journal progress) of a registered run's finished starts."""
    progress = progress if progress is not None else fold(read_events(run.journal_path))
    obs = []
    failed_attempts: dict[str, int] = {}
    for slot in run.slots:
        for a in progress.attempts.get(slot.slot, ()):
            if a.status == "failed":
                failed_attempts[slot.arm] = failed_attempts.get(slot.arm, 0) + 1
        done = progress.done(slot.slot)
        if done is None or (slot.block is not None and slot.block in progress.voided):
            continue
        if run.design.rule.test == "criteria":  # one observation per criterion's measure of the start
            for i, c in enumerate(run.design.rule.criteria):
                obs.append(
                    Observation(
                        start=slot.slot + 1,
                        block=slot.block,
                        arm=slot.arm,
                        value=float(done["measures"][c.measure]),
                        measure=c.measure,
                        failed_requests=done.get("failed") if i == 0 else 0,
                        fidelity=done.get("fidelity") if i == 0 else None,
                    )
                )
            continue
        obs.append(
            Observation(
                start=slot.slot + 1,
                block=slot.block,
                arm=slot.arm,
                value=float(done["value"]),
                measure=run.design.measure,
                failed_requests=done.get("failed"),
                prompt_hashes=done.get("prompt_hashes"),
                checks=done.get("checks") or {},
                fidelity=done.get("fidelity"),
                output_hashes=done.get("output_hashes"),
                failures=tuple(done.get("failures") or ()),
            )
        )
    return obs, failed_attempts, progress


def report_for_run(run: Any) -> dict[str, Any]:
    obs, failed_attempts, progress = run_observations(run)
    order = [s.to_json() for s in run.slots]
    report = analyze(
        run.design, obs, source="run", order=order, failed_attempts=failed_attempts, voided=progress.voided
    )
    report.update(
        run_id=run.run_id,
        registered_at=run.meta.get("registered_at"),
        seed=(run.meta.get("order") or {}).get("seed"),
        order_index=(run.meta.get("order") or {}).get("index"),
        order_count=(run.meta.get("order") or {}).get("count"),
        attempts={
            str(s + 1): [
                {
                    "attempt": a.attempt,
                    "status": a.status,
                    "error": (a.closed or {}).get("error") or (a.closed or {}).get("reason"),
                }
                for a in progress.attempts.get(s, ())
            ]
            for s in sorted(progress.attempts)
        },
        measures={str(s.slot + 1): (progress.done(s.slot) or {}).get("measures") for s in run.slots},
        arms=[{"name": a.name, "profile": a.profile, "kind": _engine_kind(a.profile)} for a in run.design.arms],
    )
    if report.get("stopped_when_decided"):
        report["stopped_when_decided"].update(_cost_not_spent(run, progress))
    draws = [
        {"start": s.slot + 1, "arm": s.arm, **d}
        for s in run.slots
        for d in ((progress.done(s.slot) or {}).get("measures") or {}).get("draws") or []
    ]
    if draws:
        report["draws"] = draws
    if run.design.hosts:  # blocks over hosts: the host each block was dealt to
        from frank.experiments.randomize import hosts_by_slot

        dealt = hosts_by_slot(run.design.hosts, run.slots)
        host_of = {s.block: dealt[s.slot] for s in run.slots}
        for block in report.get("blocks") or []:
            block["host"] = host_of.get(block["block"])
    return report


def _cost_not_spent(run: Any, progress: Any) -> dict[str, Any]:
    """What stopping when decided saved: the engine starts not run and, at the mean wall time of the cells
    that ran (cell_started to cell_done), their seconds."""
    durations = [
        a.closed["unix"] - a.started["unix"]
        for attempts in progress.attempts.values()
        for a in attempts
        if a.status == "done" and a.closed and "unix" in a.closed and "unix" in a.started
    ]
    left = sum(1 for s in run.slots if progress.done(s.slot) is None and s.block not in progress.voided)
    per_cell = mean(durations) if durations else None
    return {
        "starts_run": len(durations),
        "starts_not_run": left,
        "seconds_per_start": per_cell,
        "seconds_spent": sum(durations),
        "seconds_not_spent": per_cell * left if per_cell is not None else None,
    }


def results_csv_for_run(run: Any) -> str:
    """A registered run's values as the CSV `frank experiment analyze` reads, with its provenance in comment
    lines (run id, design name and canonical sha256, order) and what its own report decided, guards included.
    Per start it also carries what the guards compare: its failed requests and, under the prompt-IDs guard,
    one digest of its requests' prompt-ID hashes (`prompt_ids_digest`), so `analyze` checks those guards
    from the file; the others (outputs, episodes' checks) are `unchecked` there, and the run's own report
    stays the record of them."""
    report = report_for_run(run)
    obs, _, _ = run_observations(run)
    design = run.design
    criteria = design.rule.test == "criteria"
    lines = [
        f"# frank experiment report {run.run_id} --csv: the values of a registered run, for `frank experiment analyze`",
        f"# run: {run.run_id}",
        f"# design: {design.name}",
        f"# design-sha256: {design.sha256}",
        f"# order: seed {report.get('seed')}, index {report.get('order_index')} of {report.get('order_count')}",
        f"# decided in the run: {report.get('decision')}, p = {report.get('p_fraction') or report.get('p_value')}",
    ]
    if report.get("stopped_when_decided"):
        lines.append(f"# {report['decision_reason']}")
    lines += [f"# guard in the run: {g['name']}: {g['status']} ({g['detail']})" for g in report.get("guards", [])]
    fidelity = _fidelity_rows(obs, report.get("fidelity"), design.rule.control)
    with_measure = criteria or bool(fidelity)
    # what the guards compare, per start: failed requests, and one digest of its requests' prompt-ID hashes
    with_failed = any(o.failed_requests is not None for o in obs)
    with_prompts = design.guards.prompt_token_ids_identical and any(o.prompt_hashes for o in obs)
    extra = (["failed_requests"] if with_failed else []) + (["prompt_ids_sha256"] if with_prompts else [])
    lines.append(",".join(["start_order", "block", "arm", "value"] + (["measure"] if with_measure else []) + extra))
    for o in obs:
        row = [str(o.start), "" if o.block is None else str(o.block), o.arm, repr(float(o.value))]
        row += [o.measure] if with_measure else []
        row += [str(o.failed_requests) if o.failed_requests is not None else ""] if with_failed else []
        row += [prompt_ids_digest(o.prompt_hashes)] if with_prompts else []
        lines.append(",".join(row))
    blank = [""] * len(extra)
    lines += [
        ",".join([start, "", arm, repr(float(value)), measure, *blank]) for start, arm, value, measure in fidelity
    ]
    return "\n".join(lines) + "\n"


def _fidelity_rows(obs: list[Observation], fidelity: dict[str, Any] | None, control: str) -> list[tuple[str, ...]]:
    """The KL each start measured (`fidelity:SET`), and the floor the run's rule used (`fidelity_floor:SET`,
    on the control arm's row), so that `analyze` of the CSV decides the fidelity rule as the run did. With
    the control as reference, each start's KL is the one evaluated against the reference start (which has
    none); a set on which a start scored other tokens gives no rows, so the CSV cannot pass where the run
    failed."""
    rows: list[tuple[str, ...]] = []
    if (fidelity or {}).get("reference") == "control":
        spoiled = {m["set"] for m in fidelity["mismatched"]}
        kls = [e for e in fidelity["per_start"] if e["set"] not in spoiled]
        rows += [(str(e["start"]), e["arm"], e["kl"], f"fidelity:{e['set']}") for e in kls]
    else:
        for o in obs:
            for name, cell in sorted(((o.fidelity or {}).get("sets") or {}).items()):
                if cell.get("kl") is not None:
                    rows.append((str(o.start), o.arm, cell["kl"], f"fidelity:{name}"))
    named = {measure.split(":", 1)[1] for *_, measure in rows}
    for row in (fidelity or {}).get("sets", []):
        if row.get("floor") is not None and row["name"] in named:
            rows.append(("", control, row["floor"], f"fidelity_floor:{row['name']}"))
    return rows


def _engine_kind(profile: str) -> str | None:
    from frank.engine.profiles import ProfileError, load_profile

    try:
        return load_profile(profile).kind
    except ProfileError:
        return None


# -- text -----------------------------------------------------------------------------------------------


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)


def format_fidelity(fid: dict[str, Any], treatment: str, control: str) -> list[str]:
    """Per-set KL per arm beside the floor: `treatment <= control + floor` or not."""

    def kl(v: Any) -> str:
        return "-" if v is None else f"{v:.3e}"

    lines = [
        f"  fidelity (KL, top-64; rule: {treatment} <= {control} + floor, floor {fid['floor_rule']})",
        f"  {'set':<10} {treatment:>12} {control:>12} {'difference':>12} {'floor':>12}  rule",
    ]
    for row in fid["sets"]:
        mark = {True: "met", False: "NOT met", None: "no data"}[row["met"]]
        lines.append(
            f"  {row['name']:<10} {kl(row['treatment']):>12} {kl(row['control']):>12} "
            f"{kl(row['difference']):>12} {kl(row['floor']):>12}  {mark}"
        )
    if fid.get("reference") == "control":
        from frank.experiments.fidelity_control import control_reference

        lines.append(f"  reference: {control_reference(fid)}")
    lines += [f"  tokens differ: {m['detail']}" for m in fid.get("mismatched", [])]
    lines += [f"  no KL: start {u['start']} ({u['arm']}): {u['reason']}" for u in fid.get("unavailable", [])]
    return lines + [f"  note: {n}" for n in fid.get("notes", [])]


def format_report(r: dict[str, Any]) -> str:
    lines = [
        f"{r['name']}  ({r['kind']}, {r['test']} test, measure {r['measure'] or '-'})",
        f"  question: {r['question']}",
        f"  design sha256: {r['design_sha256']}",
    ]
    if r.get("run_id"):
        lines.append(
            f"  run: {r['run_id']}  seed {r.get('seed')}  order #{r.get('order_index')} (0-based) of {r.get('order_count')}"  # noqa: E501
        )
    if r.get("order"):
        lines.append(
            "  order: " + " ".join(f"{o['arm']}" + (f"(b{o['block']})" if o.get("block") else "") for o in r["order"])
        )
    if r["kind"] == "blocks":
        lines.append(f"  {'block':>5}  {r['treatment']:>14}  {r['control']:>14}  {'effect':>8}  sign")
        for b in r["blocks"]:
            eff = "-" if b["effect_pct"] is None else f"{b['effect_pct']:+.2f}%"
            lines.append(
                f"  {b['block']:>5}  {_num(b['values'].get(r['treatment'])):>14}  "
                f"{_num(b['values'].get(r['control'])):>14}  {eff:>8}  "
                f"{'void' if b['voided'] else (b['sign'] or '')}" + (f"  on {b['host']}" if b.get("host") else "")
            )
        if r.get("mean_effect_pct") is not None:
            lines.append(
                f"  mean effect {r['mean_effect_pct']:+.2f}%  ({r['wins']} wins, {r['losses']} losses, {r['ties']} ties)"  # noqa: E501
            )
    elif r["kind"] == "balanced" and r["test"] != "criteria":
        for s in r.get("starts", []):
            lines.append(f"  start {s['start']:>2}  {s['arm']:<14} {_num(s['value'])}")
        if r.get("mean_difference") is not None:
            ratio = r.get("ratio_of_means")
            lines.append(
                f"  mean difference {r['mean_difference']:+.6g} ({r['mean_effect_pct']:+.2f}%)"
                + (f", ratio of the means {r['control']}/{r['treatment']} {ratio:.3g}x" if ratio else "")
            )
    else:
        for s in r.get("starts", []):
            if s.get("start"):  # live criteria starts: each measure of each start
                lines.append(f"  start {s['start']:>2}  {s['arm']:<14} {s['measure']:<20} {_num(s['value'])}")
        for c in r.get("criteria", []):
            mark = {True: "met", False: "NOT met", None: "no data"}[c["met"]]
            lines.append(f"  {c['text']}: {_num(c['treatment'])} vs {_num(c['control'])}  {mark}")
    for d in r.get("draws", []):
        lines.append(
            f"  start {d['start']:>2}  {d['arm']:<14} draw {d['draw']}: {d['total_s']:.1f} s, "
            f"{d['passed']} of {d['episodes']} passed, {d['errors']} errors ({d.get('cache_namespace') or '-'})"
        )
    if r.get("p_value") is not None:
        lines.append(
            f"  p = {r['p_fraction']} ({r['p_value']:.6g}), null size {r.get('tested_null_size') or r['null_size']}, "
            f"smallest reachable {exact.fraction(r['smallest_p'], r['null_size'])}"
        )
    if r.get("fidelity"):
        lines += format_fidelity(r["fidelity"], r["treatment"], r["control"])
    for g in r.get("guards", []):
        lines.append(f"  guard {g['name']}: {g['status']} ({g['detail']})")
    if r.get("revert"):
        rv = r["revert"]
        lines.append(
            f"  revert rule: {rv['outcome']}"
            + (f" ({'; '.join(rv['triggers'] + rv['unchecked'])})" if rv["triggers"] or rv["unchecked"] else "")
        )
    stop = r.get("stopped_when_decided")
    if stop:
        saved = stop.get("seconds_not_spent")
        lines.append(
            f"  stopped when decided after {stop['unit']} {stop['after']} of {stop['of']}: {stop['left']} not run"
            + (f" (about {saved:.0f} s of engine starts not spent)" if saved else "")
        )
    for note in r.get("notes", []):
        lines.append(f"  note: {note}")
    lines.append(f"  decision: {r['decision'].upper()}: {r['decision_reason']}")
    return "\n".join(lines)
