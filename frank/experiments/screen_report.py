"""A screen's record and report: its values from the run's journal, the pick under its frozen rule, and the
confirmation design it sends forward (the pick against the control, blocks planned on the screen's spread).

The record (`frank experiment screen --report RUN --export FILE.json`) is self-contained: the screen's TOML
as registered, its order, every cell's value, each cell sealed (frank.experiments.seal) and the pick.
`--report FILE.json` parses that TOML again and checks its hash, types every cell (a value is a finite
number of the measure's sign: frank.experiments.values), checks every seal, and decides the pick again from
the values: an edited value, or a stated pick its values do not give, is refused naming its field and line.
Where the run is registered here, each value is compared with its journal too. A committed record is
evidence of what the screen picked (and only of that: a screen is never evidence for the pick being better).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli_w

from frank import paths, readfile, tomlfile
from frank.errors import FrankError
from frank.experiments import seal
from frank.experiments.journal import fold, read_events
from frank.experiments.screen import Screen, ScreenResult, analyze_screen, parse_screen_text
from frank.experiments.values import value_problem

if TYPE_CHECKING:
    from frank.experiments.plan import Plan

RECORD_FORMAT = "frank-screen-record-2"  # 2: each cell sealed, the last seal stated (values_seal)
RECORD_FORMATS = ("frank-screen-record-1", RECORD_FORMAT)  # what a record names itself (a campaign refuses both)
CELL_KEYS = ("start", "repeat", "setting", "value", "failed_requests", "attempts")  # what a cell's seal covers


@dataclass(frozen=True)
class Confirmation:
    """The design a screen sends forward: its pick against the control, in blocks planned on its spread."""

    name: str
    blocks: int
    plan: Plan | None  # None: the screen had no spread to plan on (the bounds' minimum)
    design_sha256: str
    design_toml: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "blocks": self.blocks,
            "plan": self.plan.to_json() if self.plan else None,
            "design_sha256": self.design_sha256,
            "design_toml": self.design_toml,
        }


@dataclass(frozen=True)
class ScreenRecord:
    """A screen run's self-contained record: the screen as registered, its order, every cell's value, the
    pick decided from them and the confirmation. `to_json` is the record file (its keys are the format's)."""

    run_id: str
    name: str
    question: str
    profile: str
    screen_sha256: str
    screen_toml: str
    order: dict[str, Any]  # seed, method, index, count
    cells: tuple[dict[str, Any], ...]  # CELL_KEYS and the cell's seal
    result: ScreenResult
    confirmation: Confirmation | None

    def to_json(self) -> dict[str, Any]:
        return {
            "format": RECORD_FORMAT,
            "run_id": self.run_id,
            "name": self.name,
            "question": self.question,
            "profile": self.profile,
            "screen_sha256": self.screen_sha256,
            "screen_toml": self.screen_toml,
            "order": self.order,
            "cells": list(self.cells),
            "values_seal": self.cells[-1]["seal"] if self.cells else self.screen_sha256[:16],
            "result": self.result.to_json(),
            "confirmation": self.confirmation.to_json() if self.confirmation else None,
        }


class ScreenRecordError(FrankError):
    """A screen record file is not one, or does not hold together (the message names the file and field)."""


def screen_values(run: Any) -> tuple[dict[tuple[int, str], float], list[dict[str, Any]]]:
    """((repeat, setting) -> value, the cells in run order) of a registered screen run."""
    progress = fold(read_events(run.journal_path))
    values: dict[tuple[int, str], float] = {}
    cells = []
    for slot in run.slots:
        done = progress.done(slot.slot)
        problem = value_problem(run.design.measure, done.value) if done is not None else None
        if problem:
            raise ScreenRecordError(f"{run.journal_path}: start {slot.slot + 1} ({slot.arm}): value: {problem}")
        value = float(done.value) if done is not None else None
        if value is not None:
            values[(int(slot.block), slot.arm)] = value
        cells.append(
            {
                "start": slot.slot + 1,
                "repeat": slot.block,
                "setting": slot.arm,
                "value": value,
                "failed_requests": done.failed if done else None,
                "attempts": len(progress.attempts.get(slot.slot, ())),
            }
        )
    return values, cells


def screen_of(run: Any) -> Screen:
    """The screen a registered screen run froze (its screen.toml)."""
    if run.meta.get("kind") != "screen":
        raise ScreenRecordError(f"{run.run_id} is a registered design, not a screen (see `frank experiment report`)")
    frozen = run.folder / "screen.toml"
    return parse_screen_text(tomlfile.read_text(frozen, ScreenRecordError), str(frozen))


def result_for_run(run: Any) -> ScreenResult:
    """A screen run's settings so far and its pick (what the console shows)."""
    return analyze_screen(screen_of(run), screen_values(run)[0])


def record_for_run(run: Any) -> ScreenRecord:
    screen = screen_of(run)
    values, cells = screen_values(run)
    return _record(screen, values, cells, run.run_id, run.meta.get("order") or {})


def _cell_row(cell: dict[str, Any]) -> str:
    """A cell's values as its seal covers them (one canonical JSON line)."""
    return json.dumps({k: cell.get(k) for k in CELL_KEYS}, sort_keys=True, separators=(",", ":"))


def _record(
    screen: Screen,
    values: dict[tuple[int, str], float],
    cells: list[dict[str, Any]],
    run_id: str,
    order: dict[str, Any],
) -> ScreenRecord:
    result = analyze_screen(screen, values)
    plain = [{k: cell.get(k) for k in CELL_KEYS} for cell in cells]
    seals = seal.chain(screen.sha256, (_cell_row(c) for c in plain))
    return ScreenRecord(
        run_id=run_id,
        name=screen.name,
        question=screen.question,
        profile=screen.profile,
        screen_sha256=screen.sha256,
        screen_toml=screen.source,
        order={k: order.get(k) for k in ("seed", "method", "index", "count")},
        cells=tuple({**c, "seal": s} for c, s in zip(plain, seals, strict=True)),
        result=result,
        confirmation=confirmation(screen, result, run_id) if result.pick else None,
    )


def read_record(path: Path | str) -> ScreenRecord:
    """A record file decided again (see the module docstring); every refusal names the file, line and field."""
    path = Path(path)
    text = readfile.read_text(path, readfile.JSON, ScreenRecordError)
    data = readfile.loads(text, path, ScreenRecordError)
    lines = readfile.json_lines(text)

    def refuse(field: tomlfile.Path_, message: str) -> ScreenRecordError:
        name = tomlfile.field_name(field)
        where = tomlfile.where(path, readfile.json_line(lines, field))
        return ScreenRecordError(f"{where}: {name}: {message}" if name else f"{where}: {message}")

    if not isinstance(data, dict):
        raise refuse((), f"expected a JSON object (a screen record), got a JSON {type(data).__name__}")
    found = data.get("format")
    if found == RECORD_FORMATS[0]:
        raise refuse(
            ("format",),
            f"{found!r} was written before a record's values were sealed: export it again from its run "
            "(`frank experiment screen --report RUN --export FILE.json`)",
        )
    if found != RECORD_FORMAT:
        raise refuse(("format",), f"expected {RECORD_FORMAT!r}, got {found!r}")
    kinds = {"screen_toml": str, "screen_sha256": str, "cells": list, "values_seal": str, "result": dict}
    for key, kind in kinds.items():
        if key not in data:
            raise refuse((key,), "missing required field")
        if not isinstance(data[key], kind):
            raise refuse((key,), f"expected a JSON {kind.__name__}, got {data[key]!r:.60}")
    screen = parse_screen_text(data["screen_toml"], f"{path}: screen_toml")
    if screen.sha256 != data["screen_sha256"]:
        raise refuse(
            ("screen_sha256",),
            f"the screen in the file hashes to {screen.sha256[:12]}…, the record says "
            f"{str(data['screen_sha256'])[:12]}…: altered",
        )
    values, cells = _read_cells(data["cells"], screen, refuse)
    last = cells[-1]["seal"] if cells else screen.sha256[:16]
    if data["values_seal"] != last:
        raise refuse(("values_seal",), f"is not the last cell's seal ({last}): cells were cut or added")
    run_id = str(data.get("run_id") or "")
    _compare_with_journal(run_id, values, cells, refuse)
    order = data.get("order")
    record = _record(screen, values, cells, run_id, order if isinstance(order, dict) else {})
    stated = data["result"].get("pick")
    if stated != record.result.pick:
        raise refuse(
            ("result", "pick"),
            f"the record says {stated!r}; its values pick {record.result.pick!r} ({record.result.pick_reason})",
        )
    return record


Refuse = Callable[[tomlfile.Path_, str], ScreenRecordError]


def _read_cells(
    raw: list[Any], screen: Screen, refuse: Refuse
) -> tuple[dict[tuple[int, str], float], list[dict[str, Any]]]:
    """Every cell typed (a value of the screen's measure) and its seal checked, or the first refusal."""
    names = {a.name for a in screen.settings}
    measure = screen.design.measure
    values: dict[tuple[int, str], float] = {}
    cells: list[dict[str, Any]] = []
    for i, cell in enumerate(raw):
        at: tomlfile.Path_ = ("cells", i)
        if not isinstance(cell, dict):
            raise refuse(at, f"expected a JSON object, got {cell!r:.60}")
        for key in (*CELL_KEYS, "seal"):
            if key not in cell:
                raise refuse((*at, key), "missing required field")
        extra = sorted(set(cell) - {*CELL_KEYS, "seal"})
        if extra:
            raise refuse((*at, extra[0]), f"unknown field (known: {', '.join(CELL_KEYS)}, seal)")
        counts = {"start": 1, "repeat": 1, "attempts": 0, "failed_requests": 0}
        for key, low in counts.items():
            value = cell[key]
            if value is None and key == "failed_requests":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise refuse((*at, key), f"expected a whole number of at least {low}, got {value!r:.60}")
        setting, repeat, value = cell["setting"], cell["repeat"], cell["value"]
        if not isinstance(setting, str) or setting not in names or repeat > screen.repeats:
            raise refuse(at, f"no setting {setting!r} in repeat {repeat} of this screen")
        if (repeat, setting) in values or any(c["repeat"] == repeat and c["setting"] == setting for c in cells):
            raise refuse(at, f"{setting!r} in repeat {repeat} is measured twice")
        if value is not None:
            problem = value_problem(measure, value)
            if problem:
                raise refuse((*at, "value"), problem)
            values[(repeat, setting)] = float(value)
        cells.append(cell)
    broken = seal.first_broken(screen.sha256, [_cell_row(c) for c in cells], [str(c["seal"]) for c in cells])
    if broken is not None:
        c = cells[broken]
        raise refuse(
            ("cells", broken, "value"),
            f"{c['setting']!r} in repeat {c['repeat']}: its values are not the ones its seal covers "
            "(edited after export), or a cell before it was removed or moved",
        )
    return values, cells


def _compare_with_journal(
    run_id: str, values: dict[tuple[int, str], float], cells: list[dict[str, Any]], refuse: Refuse
) -> None:
    """Where the record's run is registered here, its journal is the source: each value the record holds must
    be its value there (a cell not measured yet when it was exported may have been measured since)."""
    from frank.experiments import registry

    folder = registry.experiments_dir(create=False) / run_id
    if not run_id or "/" in run_id or not (folder / "screen.toml").exists():
        return
    journal, _ = screen_values(registry.load_run(run_id))
    for i, cell in enumerate(cells):
        key = (cell["repeat"], cell["setting"])
        if key in values and values[key] != journal.get(key):
            raise refuse(
                ("cells", i, "value"),
                f"{cell['setting']!r} in repeat {cell['repeat']}: {values.get(key)!r} in the record, "
                f"{journal.get(key)!r} in run {run_id}'s journal",
            )


# -- the confirmation design ----------------------------------------------------------------------------


def confirmation(screen: Screen, result: ScreenResult, run_id: str = "") -> Confirmation:
    """The pick against the control as a blocks design (the seed's rule: lower in every block), its blocks
    from `frank experiment plan` on the screen's spread, within [confirm]'s bounds."""
    from frank.experiments import plan as planning
    from frank.experiments.design import parse_design_text

    assert result.pick is not None
    conf = screen.confirm
    blocks, power = conf.min_blocks, None
    if result.spread_pct:
        probe = parse_design_text(_design_toml(screen, result, conf.min_blocks, run_id))
        power = planning.plan(probe, result.spread_pct, conf.effect_pct, f"screen {run_id or screen.name}")
        need = power.blocks_for_80 or conf.max_blocks
        blocks = max(conf.min_blocks, min(conf.max_blocks, need))
    text = _design_toml(screen, result, blocks, run_id)
    design = parse_design_text(text)
    return Confirmation(design.name, blocks, power, design.sha256, text)


def _design_toml(screen: Screen, result: ScreenResult, blocks: int, run_id: str) -> str:
    design = screen.design
    pick = next(a for a in screen.settings if a.name == result.pick)
    wl = design.workload
    assert wl is not None
    workload: dict[str, Any] = {"name": wl.name, "mode": wl.mode}
    if wl.draws:
        workload["draws"] = list(wl.draws)
    for key in ("requests", "max_tokens"):
        if getattr(wl, key) is not None:
            workload[key] = getattr(wl, key)
    if wl.warmup_requests:
        workload["warmup_requests"] = wl.warmup_requests
    if wl.output_tokens != 1:
        workload["output_tokens"] = wl.output_tokens
    doc = {
        "name": f"{screen.name}-confirm",
        "question": f"Does {pick.name} {'shorten' if screen.direction == 'lower' else 'raise'} {design.measure} "
        f"against {screen.control.name}, in every block?",
        "profile": screen.profile,
        "arms": [
            {"name": screen.control.name, "knobs": screen.control.knob_dict},
            {"name": pick.name, "knobs": pick.knob_dict},
        ],
        "design": {"kind": "blocks", "blocks": blocks, "stop_when_decided": screen.confirm.stop_when_decided},
        "workload": workload,
        "measure": {"name": design.measure},
        "rule": {
            "test": "sign",
            "treatment": pick.name,
            "control": screen.control.name,
            "direction": screen.direction,
            "require_all": True,
        },
        "guards": {
            "no_failed_requests": design.guards.no_failed_requests,
            "prompt_token_ids_identical": design.guards.prompt_token_ids_identical,
        },
        "failure": {"action": "retry", "max_retries": 1},
        "revert": {
            "description": f"a failure only {pick.name} shows, or {design.measure} worse than {screen.control.name}'s",
            "treatment_only_failures": True,
            "max_worse_pct": 0.0,
        },
    }
    spread = f"{result.spread_pct:.3g}%" if result.spread_pct else "not measured"
    head = [
        f"# The confirmation of screen {screen.name} (run {run_id or '-'}, screen sha256 {screen.sha256[:16]}…):",
        f"# its pick, {pick.name}, against the control {screen.control.name}, in {blocks} blocks planned for a "
        f"{screen.confirm.effect_pct:g}% effect on the screen's spread ({spread}).",
        "# Written by `frank experiment screen --report`; register it before it runs: the screen is not evidence.",
    ]
    return "\n".join(head) + "\n" + tomli_w.dumps(doc)


# -- text -----------------------------------------------------------------------------------------------


def _v(value: Any) -> str:
    return "–" if value is None else f"{value:.4g}"


def format_record(rec: ScreenRecord) -> str:
    r = rec.result
    lines = [
        f"{rec.name}  (screen, {r.repeats} repeats, measure {r.measure}, {r.direction} is better)",
        f"  question: {rec.question}",
        f"  screen sha256: {rec.screen_sha256}" + (f"  run {rec.run_id}" if rec.run_id else ""),
        f"  {'setting':<28} {'median':>10}  {'vs control':>10}  wins  values",
    ]
    for s in r.settings:
        effects = [e for e in s.effects_pct if e is not None]
        eff = "control" if s.is_control else (f"{sum(effects) / len(effects):+.2f}%" if effects else "–")
        wins = "" if s.is_control else f"{s.wins}/{s.compared}"
        mark = " <- pick" if s.name == r.pick else ""
        lines.append(
            f"  {s.name:<28} {_v(s.median):>10}  {eff:>10}  {wins:>4}  " + " ".join(_v(v) for v in s.values) + mark
        )
    if r.spread_pct is not None:
        lines.append(f"  spread of a candidate's effect between repeats: {r.spread_pct:.3g}% ({r.spread_effects} dof)")
    lines.append(f"  pick: {r.pick or 'none'}: {r.pick_reason}")
    conf = rec.confirmation
    if conf:
        plan = conf.plan
        lines.append(
            f"  confirmation: {conf.name}, {conf.blocks} blocks"
            + (f" (80% power needs {plan.blocks_for_80})" if plan and plan.blocks_for_80 else "")
            + "; write it with --design-out FILE.toml and register it"
        )
    lines.append("  a screen is not evidence: only the registered confirmation decides")
    return "\n".join(lines)


def write_json(path: Path, record: ScreenRecord) -> None:
    """The record file; a file already there is refused, unless it is this very record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    paths.write_new(path, json.dumps(record.to_json(), indent=1, sort_keys=True) + "\n")
