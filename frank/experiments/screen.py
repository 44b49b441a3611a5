"""Screens: the campaign's first step, which finds the setting worth a registered test.

A screen (TOML, docs/experiments.md "Screens") names a profile, a control setting and candidate settings (a
list, or a grid over knobs, each on top of the control's knobs), the measure, short cells with `repeats`,
and a pick rule written before it runs: the candidate with the best median among those that beat the
control in at least `min_wins` of the repeats. Each repeat runs every setting once, in an order drawn at
registration and recorded, so a candidate is compared with the control of its own repeat.

A screen runs through the experiment runner as a registered run of kind "screen" (the same journal, jobs,
`--detach`, `--stop-after` and resume as a design: `Screen.design` is the runnable form, one arm per
setting, one block per repeat). What comes out is the pick and a confirmation design, the pick against the
control, whose blocks come from `frank experiment plan` on the screen's own spread, for `frank experiment
register`. A screen is never evidence: it looks at many settings and keeps the best, so its own numbers
are biased toward the pick; only the confirmation decides (the campaign refuses a screen run as evidence).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import statistics
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from frank.experiments.design import (
    MEASURES,
    Arm,
    Design,
    canonical_dict,
    check_arm_profiles,
    parse_design,
    read_checked,
    read_source,
)
from frank.experiments.design_schema import DIRECTIONS, ArmName, Heading
from frank.experiments.tables import Refusals, bounded, one_of
from frank.experiments.tally import effect_pct
from frank.tomlfile import KeyLines, Strict

MAX_SETTINGS = 16
MAX_REPEATS = 20
PICK_RULES = ("best_median",)


# -- the file's schema (frank.tomlfile: strict types, unknown fields refused, each refusal at its line) ------


class SettingSchema(Strict):
    """[control] or one [[candidates]]: knobs on top of the control's."""

    name: ArmName
    description: str = ""
    knobs: dict[str, Any] = Field(default_factory=dict)


class ScreenMeasureSchema(Strict):
    name: str
    direction: Annotated[str, one_of(DIRECTIONS)] = "lower"


class PickSchema(Strict):
    rule: Annotated[str, one_of(PICK_RULES)] = "best_median"
    min_wins: Annotated[int, bounded(1, MAX_REPEATS)] | None = None  # default: every repeat


def _percent(value: float) -> float:
    if not 0 < value < 100:
        raise ValueError(f"must be between 0 and 100 (percent), got {value:g}")
    return value


class ConfirmSchema(Strict):
    effect_pct: Annotated[float, AfterValidator(_percent)] = 5.0
    min_blocks: Annotated[int, bounded(1, 100)] = 5
    max_blocks: Annotated[int, bounded(1, 100)] | None = None  # default: max(min_blocks, 12)
    stop_when_decided: bool = True


class ScreenSchema(Heading):
    repeats: Annotated[int, bounded(2, MAX_REPEATS)] = 3
    control: SettingSchema
    candidates: list[SettingSchema] = Field(default_factory=list)
    grid: dict[str, list[Any]] | None = None  # knob = [values]: one candidate per combination
    workload: dict[str, Any]  # checked as a design's [workload] (the runnable form)
    measure: ScreenMeasureSchema
    pick: PickSchema
    confirm: ConfirmSchema = Field(default_factory=ConfirmSchema)
    guards: dict[str, Any] = Field(default_factory=dict)  # checked as a design's [guards]


@dataclass(frozen=True)
class Pick:
    rule: str  # best_median: the best median among candidates that beat the control in >= min_wins repeats
    min_wins: int


@dataclass(frozen=True)
class Confirm:
    """How the confirmation design is made: the effect it is planned for and its bounds on blocks."""

    effect_pct: float
    min_blocks: int
    max_blocks: int
    stop_when_decided: bool


@dataclass(frozen=True)
class Screen:
    name: str
    question: str
    profile: str
    control: Arm
    candidates: tuple[Arm, ...]
    repeats: int
    direction: str
    pick: Pick
    confirm: Confirm
    design: Design  # the runnable form: one arm per setting (control first), one block per repeat
    source: str  # the TOML text (the record carries it, so a report is decided again from the file)
    sha256: str

    @property
    def settings(self) -> tuple[Arm, ...]:
        return (self.control, *self.candidates)


# -- reading ------------------------------------------------------------------------------------------


def load_screen(path: Path | str, *, check_profiles: bool = False) -> Screen:
    return parse_screen_text(read_source(path), str(path), check_profiles=check_profiles)


def parse_screen_text(text: str, where: str = "<screen>", *, check_profiles: bool = False) -> Screen:
    """The screen of a TOML text. Every refusal names the field as the file has it (`control.knobs.X`,
    `candidates[0].knobs.X`, `grid.X`), never the arms frank derives from them."""
    data, lines = read_checked(text, where)
    return _parse(data, text, where, lines, check_profiles)


def _setting(table: SettingSchema, field: str, base: dict[str, Any], refusals: Refusals) -> Arm:
    for knob, value in table.knobs.items():
        if isinstance(value, (dict, list)):
            refusals.add(f"{field}.knobs.{knob}", f"expected a single value, got {value!r}")
    return Arm(table.name, "", tuple(sorted({**base, **table.knobs}.items())), table.description)


def _grid(grid: dict[str, list[Any]], base: dict[str, Any], refusals: Refusals) -> list[tuple[Arm, str]]:
    """One candidate per combination of the grid's values, each with the field it comes from (`grid`)."""
    axes = []
    for knob, values in grid.items():
        if not values or any(isinstance(v, (dict, list)) for v in values):
            refusals.add(("grid", knob), f"expected an array of single values, got {values!r}")
        axes.append([(knob, v) for v in values])
    arms = []
    for combo in itertools.product(*axes):
        knobs = dict(combo)
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(f"{k}.{v}" for k, v in combo))  # cpu_poll.50
        field = "grid." + ",".join(f"{k}={v}" for k, v in combo)  # in messages: which combination
        arms.append((Arm(name, "", tuple(sorted({**base, **knobs}.items())), ""), field))
    return arms


def _check_knobs(top: ScreenSchema, refusals: Refusals) -> None:
    """Each knob the file states exists in the screen's profile and takes the values given, each refusal at
    the field as written (`candidates[0].knobs.no_such_knob`, `grid.num_speculative_tokens[1]`)."""
    from frank.engine.profiles import ProfileError, load_profile

    try:
        profile = load_profile(top.profile)
    except ProfileError as exc:
        refusals.add("profile", str(exc))
        return
    stated = [(f"control.knobs.{k}", k, v) for k, v in top.control.knobs.items()]
    stated += [(f"candidates[{i}].knobs.{k}", k, v) for i, c in enumerate(top.candidates) for k, v in c.knobs.items()]
    for knob, values in (top.grid or {}).items():
        if knob not in profile.knobs:
            stated.append((f"grid.{knob}", knob, None))
        stated += [(f"grid.{knob}[{j}]", knob, v) for j, v in enumerate(values) if knob in profile.knobs]
    known = ", ".join(sorted(profile.knobs)) or "none"
    for field, knob, value in stated:
        if knob not in profile.knobs:
            refusals.add(field, f"profile {profile.name} has no knob {knob!r} (knobs: {known})")
            continue
        try:
            profile.knobs[knob].parse(value)
        except ProfileError as exc:
            refusals.add(field, str(exc))


def _parse(data: dict[str, Any], text: str, where: str, lines: KeyLines, check_profiles: bool = False) -> Screen:
    refusals = Refusals(where, lines)
    top = refusals.validate(ScreenSchema, data)
    refusals.check()
    assert top is not None  # check() refused every other outcome
    add = refusals.add
    control = _setting(top.control, "control", {}, refusals)
    base = control.knob_dict
    # each candidate with the field it comes from: what a refusal names
    origins = [
        (_setting(c, f"candidates[{i}]", base, refusals), f"candidates[{i}]") for i, c in enumerate(top.candidates)
    ]
    if top.grid is not None:
        origins += _grid(top.grid, base, refusals)
    candidates = [arm for arm, _ in origins]
    if not candidates:
        add("candidates", "a screen needs at least one candidate ([[candidates]] or [grid])")
    seen: dict[str, str] = {control.name: "control"}
    for arm, field in origins:
        grid = field.startswith("grid")  # a grid's combination is named by its values, at the [grid] table
        what = f"{arm.name!r} ({field.removeprefix('grid.')})" if grid else f"{arm.name!r}"
        if arm.name in seen:
            add("grid" if grid else f"{field}.name", f"{what} is used twice (also {seen[arm.name]})")
        seen.setdefault(arm.name, field)
        if arm.knobs == control.knobs:
            add("grid" if grid else f"{field}.knobs", f"{what} is the control's setting: nothing to screen")
    if check_profiles:
        _check_knobs(top, refusals)
    if len(candidates) + 1 > MAX_SETTINGS:
        add("candidates", f"{len(candidates) + 1} settings; at most {MAX_SETTINGS} a screen")
    measure, direction = top.measure.name, top.measure.direction
    if measure not in MEASURES:
        add("measure.name", f"{measure!r} is not one of: {', '.join(MEASURES)}")
    min_wins = top.pick.min_wins if top.pick.min_wins is not None else top.repeats
    if min_wins > top.repeats:
        add("pick.min_wins", f"must be at most {top.repeats}, got {min_wins} (the screen's repeats)")
    low = top.confirm.min_blocks
    high = top.confirm.max_blocks if top.confirm.max_blocks is not None else max(low, 12)
    if high < low:
        add("confirm.max_blocks", f"must be at least {low}, got {high} (confirm.min_blocks)")
    refusals.check()
    pick = Pick(top.pick.rule, min_wins)
    confirm = Confirm(float(top.confirm.effect_pct), low, high, top.confirm.stop_when_decided)
    settings = (control, *candidates)
    # the runnable form: a blocks design parsed as any design is (the workload, guards and the measure
    # checked by the same code, at their lines in this file), then given every setting as an arm
    runnable = {
        "name": top.name,
        "question": top.question,
        "description": top.description,
        "profile": top.profile,
        "arms": [{"name": a.name, "knobs": a.knob_dict} for a in settings[:2]],
        "design": {"kind": "blocks", "blocks": top.repeats},
        "workload": top.workload,
        "measure": {"name": measure},
        "rule": {"test": "sign", "treatment": candidates[0].name, "control": control.name, "direction": direction},
        "guards": top.guards,
    }
    design = parse_design(runnable, where, lines)
    arms = tuple(replace(a, profile=top.profile) for a in settings)
    design = replace(design, arms=arms)  # type: ignore[arg-type]  # a screen's design has one arm per setting
    canonical = json.dumps(
        {"screen": 1, **canonical_dict(design), "pick": asdict(pick), "confirm": asdict(confirm)},
        sort_keys=True,
        separators=(",", ":"),
    )
    sha = hashlib.sha256(canonical.encode()).hexdigest()
    design = replace(design, canonical=canonical, sha256=sha)
    if check_profiles:  # the knobs were checked above at their fields; this adds what the engine kind can measure
        check_arm_profiles(design, where, lines)
    return Screen(
        top.name,
        design.question,
        top.profile,
        arms[0],
        arms[1:],
        top.repeats,
        direction,
        pick,
        confirm,
        design,
        text,
        sha,
    )


# -- the analysis -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SettingResult:
    name: str
    knobs: dict[str, Any]
    values: tuple[float | None, ...]  # per repeat (None: not measured yet)
    median: float | None
    mean: float | None
    effects_pct: tuple[float | None, ...]  # per repeat, against the control of that repeat
    wins: int  # repeats in which it beat the control
    compared: int  # repeats with both values
    qualifies: bool  # beats the control in at least min_wins repeats (candidates only)
    is_control: bool = False


@dataclass(frozen=True)
class ScreenResult:
    name: str
    screen_sha256: str
    measure: str
    direction: str
    repeats: int
    complete: bool
    settings: tuple[SettingResult, ...]
    pick: str | None  # the candidate that goes forward; None: none qualified (the control stays)
    pick_reason: str
    spread_pct: float | None  # the pooled spread of a candidate's effect from repeat to repeat
    spread_effects: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _better(direction: str, a: float, b: float) -> bool:
    return a < b if direction == "lower" else a > b


def analyze_screen(screen: Screen, values: dict[tuple[int, str], float]) -> ScreenResult:
    """values: (repeat, setting) -> measured value. The pick is made only once every cell is measured;
    before that the result says which setting leads."""
    design, d = screen.design, screen.direction
    control = screen.control.name
    results = []
    deviations: list[float] = []
    dof = 0
    for arm in screen.settings:
        vals = tuple(values.get((r, arm.name)) for r in range(1, screen.repeats + 1))
        ctrl = [values.get((r, control)) for r in range(1, screen.repeats + 1)]
        measured = [v for v in vals if v is not None]
        effects = tuple(
            effect_pct(v, c) if v is not None and c is not None else None for v, c in zip(vals, ctrl, strict=True)
        )
        pairs = [(v, c) for v, c in zip(vals, ctrl, strict=True) if v is not None and c is not None]
        wins = sum(1 for v, c in pairs if _better(d, v, c))
        is_control = arm.name == control
        known = [e for e in effects if e is not None]
        if not is_control and len(known) > 1:
            m = statistics.fmean(known)
            deviations += [(e - m) ** 2 for e in known]
            dof += len(known) - 1
        results.append(
            SettingResult(
                arm.name,
                arm.knob_dict,
                vals,
                statistics.median(measured) if measured else None,
                statistics.fmean(measured) if measured else None,
                effects,
                wins,
                len(pairs),
                (not is_control) and wins >= screen.pick.min_wins,
                is_control,
            )
        )
    complete = all(v is not None for s in results for v in s.values)
    qualified = [s for s in results if s.qualifies and s.median is not None]
    best = None
    for s in qualified:
        if best is None or _better(d, s.median, best.median):  # type: ignore[arg-type]
            best = s
    need = f"beat {control} in at least {screen.pick.min_wins} of {screen.repeats} repeats"
    if not complete:
        lead = f"{best.name} leads" if best else "no candidate qualifies yet"
        cells_measured = sum(v is not None for s in results for v in s.values)
        reason = f"{cells_measured} of {len(results) * screen.repeats} cells measured; {lead}"
        pick = None
    elif best is None:
        reason, pick = f"no candidate did {need}: {control} stays", None
    else:
        word = "lowest" if d == "lower" else "highest"
        reason = f"{best.name}: the {word} median ({best.median:.6g}) of the {len(qualified)} candidates that {need}"
        pick = best.name
    spread = math.sqrt(sum(deviations) / dof) if dof else None
    return ScreenResult(
        screen.name,
        screen.sha256,
        design.measure,
        d,
        screen.repeats,
        complete,
        tuple(results),
        pick,
        reason,
        spread,
        dof,
    )
