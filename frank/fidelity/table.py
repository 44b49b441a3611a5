"""The seed's fidelity row as a file: for each engine (a quantization served by an engine), the KL of its
next-token distribution against the float32 reference on each text set, beside the floors (the reference
against itself, two starts of the same engine configuration), with the seed's own numbers beside it.

`build_table` makes one from saved runs (`frank fidelity floor`: one start measured against the reference,
a second start against the first; or `frank fidelity run`: one start); `frank fidelity table` writes it,
`frank fidelity report FILE` reads it (`load_table`: every refusal names the file and the field).

    {"format": "frank-fidelity-table", "format_version": 1, "title": ..., "model": ..., "reference": ...,
     "top_k": 64, "sets": ["code", "agent", "prose"],
     "engines": [{"label": "Q4_K_M", "engine": "llama.cpp", "profile": ..., "knobs": {...}, "run": ...,
                  "machine": ..., "sets": [{"name": "code", "kl": ..., "reference_floor": ...,
                                            "engine_floor": ..., "positions": ..., "misses": ...}, ...]}],
     "seed": [{"label": "EXL3 3-bit", "kl": {"code": 0.129, ...}}], "notes": [...]}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from frank import readfile, tomlfile
from frank.errors import FrankError
from frank.tomlfile import Strict

if TYPE_CHECKING:
    from frank.fidelity.runs import FidelityRun

FORMAT = "frank-fidelity-table"
FORMAT_VERSION = 1


class TableError(FrankError, ValueError):
    """A fidelity table file is wrong; the message names the file and the field."""


class SetResult(Strict):
    name: str = Field(min_length=1)
    kl: float = Field(ge=0)
    reference_floor: float | None = Field(None, ge=0)  # the reference against itself
    engine_floor: float | None = Field(None, ge=0)  # two starts of this engine configuration
    positions: int = Field(ge=1)
    misses: int = Field(ge=0)  # reference top-k tokens the engine did not return, summed over positions


class EngineRow(Strict):
    label: str = Field(min_length=1)  # the quantization, e.g. "Q4_K_M" or "EXL3 3.0 bpw"
    engine: str = Field(min_length=1)  # the engine kind's label, e.g. "llama.cpp"
    profile: str = Field(min_length=1)
    knobs: dict[str, str | int | float] = Field(default_factory=dict)
    run: str = Field(min_length=1)  # the saved floor run the numbers come from
    machine: str = ""
    sets: list[SetResult] = Field(min_length=1)

    def kl(self, name: str) -> float | None:
        return next((s.kl for s in self.sets if s.name == name), None)


class SeedRow(Strict):
    label: str = Field(min_length=1)
    kl: dict[str, float]


class FidelityTable(Strict):
    format: str
    format_version: int
    title: str = Field(min_length=1)
    model: str = Field(min_length=1)
    reference: str = Field(min_length=1)
    top_k: int = Field(ge=1)
    sets: list[str] = Field(min_length=1)
    engines: list[EngineRow]
    seed: list[SeedRow] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> FidelityTable:
        if self.format != FORMAT:
            raise ValueError(f"format: expected {FORMAT!r}, got {self.format!r}")
        if self.format_version != FORMAT_VERSION:
            raise ValueError(f"format_version: this frank reads version {FORMAT_VERSION}, got {self.format_version}")
        for i, row in enumerate(self.engines):
            names = [s.name for s in row.sets]
            if sorted(names) != sorted(self.sets):
                raise ValueError(f"engines[{i}].sets: {names} are not the table's sets {list(self.sets)}")
        labels = [row.label for row in self.engines]
        if len(set(labels)) != len(labels):
            raise ValueError(f"engines: two rows with one label: {labels}")
        return self


def load_table(path: Path) -> FidelityTable:
    return _validate(readfile.read_object(path, readfile.JSON, TableError), path)


def _validate(data: dict[str, Any], path: Path) -> FidelityTable:
    return tomlfile.validate(FidelityTable, data, path, None, TableError)


def engine_row(label: str, engine: str, run: FidelityRun, machine: str = "") -> EngineRow:
    """One row from a saved run: a floor run (frank.fidelity.runs.floor_run, its engine floor measured), or a
    single run of the running engine (its engine floor where an earlier floor run of the configuration
    measured one, else none)."""
    if run.get("kind") not in ("floor", "run"):
        raise FrankError(f"fidelity run {run.get('id')} is a {run.get('kind')} run: a table row needs a measure")
    sets = []
    for s in run["sets"]:
        floor = s.get("floor")
        sets.append(
            SetResult(
                name=s["name"],
                kl=float(s["kl"]),
                reference_floor=floor["reference"] if floor else None,
                engine_floor=s.get("engine_floor", floor["engine"] if floor else None),
                positions=int(s["positions"]),
                misses=int(s["misses"]),
            )
        )
    return EngineRow(
        label=label, engine=engine, profile=run["profile"], knobs=run.get("knobs", {}), run=run["id"],
        machine=machine, sets=sets,
    )  # fmt: skip


def build_table(
    out: Path, title: str, model: str, reference: str, rows: list[EngineRow], top_k: int,
    seed: list[SeedRow] | None = None, notes: list[str] | None = None,
) -> FidelityTable:  # fmt: skip
    """The table of these rows (checked as `load_table` checks a file: a refusal names `out` and the field)."""
    data = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "title": title, "model": model, "reference": reference,
        "top_k": top_k, "sets": [s.name for s in rows[0].sets] if rows else [],
        "engines": [row.model_dump(mode="json") for row in rows],
        "seed": [row.model_dump(mode="json") for row in seed or ()], "notes": list(notes or ()),
    }  # fmt: skip
    return _validate(data, out)


def table_json(table: FidelityTable) -> str:
    return json.dumps(table.model_dump(mode="json"), indent=2) + "\n"


def format_table(table: FidelityTable) -> str:
    """The table for a terminal: one line per engine, KL per set, then the floors."""
    width = max([len(r.label) for r in table.engines] + [len(r.label) for r in table.seed] + [6]) + 2
    engine = max([len(r.engine) for r in table.engines] + [len("ENGINE")]) + 2  # "exllamav3 1.6.5" is 15 wide
    head = f"{'':<{width}}{'ENGINE':<{engine}}" + "".join(f"{name:>11}" for name in table.sets)
    lines = [f"{table.title} (top-{table.top_k} KL against {table.reference})", head]
    for row in table.engines:
        kls = "".join(f"{row.kl(n) or 0:>11.4f}" for n in table.sets)
        lines.append(f"{row.label:<{width}}{row.engine:<{engine}}" + kls)
    for row in table.engines:
        floors = {s.name: s for s in row.sets}
        lines.append(
            f"{'  floor, ' + row.label:<{width + engine}}"
            + "".join(f"{_floor(floors[n].engine_floor):>11}" for n in table.sets)
            + "   (two starts)"
        )
    if table.engines:
        first = {s.name: s for s in table.engines[0].sets}
        lines.append(
            f"{'  floor, reference':<{width + engine}}"
            + "".join(f"{_floor(first[n].reference_floor):>11}" for n in table.sets)
            + "   (reference against itself)"
        )
    for seed in table.seed:
        kls = "".join(f"{seed.kl.get(n, 0):>11.3f}" for n in table.sets)
        lines.append(f"{seed.label:<{width}}{'seed':<{engine}}" + kls)
    lines.extend(table.notes)
    return "\n".join(lines)


def _floor(value: float | None) -> str:
    return "-" if value is None else f"{value:.2e}"
