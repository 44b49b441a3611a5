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
from typing import Any

from frank.experiments.design import (
    ARM_NAME,
    DIRECTIONS,
    MEASURES,
    Arm,
    Design,
    canonical_dict,
    check_arm_profiles,
    parse_checked,
    parse_design,
    read_source,
)
from frank.experiments.tables import Table
from frank.experiments.tally import effect_pct

MAX_SETTINGS = 16
MAX_REPEATS = 20
TOP_FIELDS = (
    "name",
    "question",
    "description",
    "profile",
    "repeats",
    "control",
    "candidates",
    "grid",
    "workload",
    "measure",
    "pick",
    "confirm",
    "guards",
)
PICK_RULES = ("best_median",)


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
    def build(data: dict[str, Any]) -> Screen:
        screen = _parse(data, text, where)
        if check_profiles:
            check_arm_profiles(screen.design, where)
        return screen

    return parse_checked(text, where, build)


def _setting(raw: Any, field: str, where: str, base: dict[str, Any]) -> Arm:
    table = Table(raw, field, where, ("name", "description", "knobs"))
    name = table.get("name", str)
    if not ARM_NAME.match(name):
        raise table.error("name", f"{name!r}: use letters, digits, '_', '.', '-'")
    knobs = table.get("knobs", dict, {})
    for knob, value in knobs.items():
        if isinstance(value, (dict, list)):
            raise table.error(f"knobs.{knob}", f"expected a single value, got {value!r}")
    merged = {**base, **knobs}
    return Arm(name, "", tuple(sorted(merged.items())), table.get("description", str, ""))


def _grid(raw: Any, where: str, base: dict[str, Any]) -> list[Arm]:
    table = Table(raw, "grid", where, tuple(raw) if isinstance(raw, dict) else ())
    axes = []
    for knob in table.data:
        values = table.get(knob, list, what="an array of the knob's values")
        if not values or any(isinstance(v, (dict, list)) for v in values):
            raise table.error(knob, f"expected an array of single values, got {values!r}")
        axes.append([(knob, v) for v in values])
    arms = []
    for combo in itertools.product(*axes):
        knobs = dict(combo)
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(f"{k}.{v}" for k, v in combo))  # cpu_poll.50
        arms.append(Arm(name, "", tuple(sorted({**base, **knobs}.items())), ""))
    return arms


def _parse(data: dict[str, Any], text: str, where: str) -> Screen:
    top = Table(data, "", where, TOP_FIELDS)
    name = top.get("name", str)
    if not name.strip():
        raise top.error("name", "must not be empty")
    profile = top.get("profile", str, "embedded-cpu")
    repeats = top.count("repeats", 3, minimum=2, maximum=MAX_REPEATS)
    control = _setting(top.get("control", dict), "control", where, {})
    base = control.knob_dict
    candidates = [
        _setting(item, f"candidates[{i}]", where, base)
        for i, item in enumerate(top.get("candidates", list, [], what="an array of [[candidates]] tables"))
    ]
    if "grid" in data:
        candidates += _grid(data["grid"], where, base)
    if not candidates:
        raise top.error("candidates", "a screen needs at least one candidate ([[candidates]] or [grid])")
    seen: dict[str, str] = {control.name: "control"}
    for i, arm in enumerate(candidates):
        if arm.name in seen:
            raise top.error(f"candidates[{i}].name", f"{arm.name!r} is used twice")
        seen[arm.name] = arm.name
        if arm.knobs == control.knobs:
            raise top.error(f"candidates[{i}].knobs", f"{arm.name!r} is the control's setting: nothing to screen")
    if len(candidates) + 1 > MAX_SETTINGS:
        raise top.error("candidates", f"{len(candidates) + 1} settings; at most {MAX_SETTINGS} a screen")
    mtable = Table(top.get("measure", dict), "measure", where, ("name", "direction"))
    measure = mtable.get("name", str)
    if measure not in MEASURES:
        raise mtable.error("name", f"{measure!r} is not one of: {', '.join(MEASURES)}")
    direction = mtable.choice("direction", DIRECTIONS, "lower")
    ptable = Table(top.get("pick", dict), "pick", where, ("rule", "min_wins"))
    pick = Pick(ptable.choice("rule", PICK_RULES, "best_median"), ptable.count("min_wins", repeats, maximum=repeats))
    ctable = Table(
        top.get("confirm", dict, {}), "confirm", where, ("effect_pct", "min_blocks", "max_blocks", "stop_when_decided")
    )
    effect = ctable.get("effect_pct", (int, float), 5.0, what="a number")
    if not 0 < effect < 100:
        raise ctable.error("effect_pct", f"must be between 0 and 100 (percent), got {effect}")
    low = ctable.count("min_blocks", 5, maximum=100)
    confirm = Confirm(
        float(effect),
        low,
        ctable.count("max_blocks", max(low, 12), minimum=low, maximum=100),
        ctable.get("stop_when_decided", bool, True),
    )
    settings = (control, *candidates)
    # the runnable form: a blocks design parsed as any design is (the workload, guards and the measure
    # checked by the same code), then given every setting as an arm
    runnable = {
        "name": name,
        "question": top.get("question", str),
        "description": top.get("description", str, ""),
        "profile": profile,
        "arms": [{"name": a.name, "knobs": a.knob_dict} for a in settings[:2]],
        "design": {"kind": "blocks", "blocks": repeats},
        "workload": top.get("workload", dict),
        "measure": {"name": measure},
        "rule": {"test": "sign", "treatment": candidates[0].name, "control": control.name, "direction": direction},
        "guards": top.get("guards", dict, {}),
    }
    design = parse_design(runnable, where)
    arms = tuple(replace(a, profile=profile) for a in settings)
    design = replace(design, arms=arms)  # type: ignore[arg-type]  # a screen's design has one arm per setting
    canonical = json.dumps(
        {"screen": 1, **canonical_dict(design), "pick": asdict(pick), "confirm": asdict(confirm)},
        sort_keys=True,
        separators=(",", ":"),
    )
    sha = hashlib.sha256(canonical.encode()).hexdigest()
    design = replace(design, canonical=canonical, sha256=sha)
    return Screen(
        name, design.question, profile, arms[0], arms[1:], repeats, direction, pick, confirm, design, text, sha
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
