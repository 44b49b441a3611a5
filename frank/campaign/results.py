"""What the campaign's headless actions return (frank.campaign.actions): frozen records the CLI and the
console read by field; `--json` prints their `to_json()`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from frank.campaign.parts import PartState


@dataclass(frozen=True)
class TakesEffect:
    """Which starts use a part's served defaults, and what still overrides them (frank.campaign.serving)."""

    profile: str
    starts: str  # the starts that use the new defaults, in words
    notes: tuple[str, ...]  # what still overrides them (a saved knob, the running engine)
    running_engine: dict[str, Any] | None  # pid, knobs and the knobs that differ, of a running engine

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"notes": list(self.notes)}


@dataclass(frozen=True)
class Initialized:
    file: str
    history: str
    created: bool  # False: an existing file whose history was started
    example: str | None
    parts: tuple[str, ...]
    at: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"parts": list(self.parts)}


@dataclass(frozen=True)
class Adopted:
    part: str
    from_state: PartState
    run_id: str
    design_sha256: str
    decision: str
    p_fraction: str | None
    at: float
    state: PartState = "adopted"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["from"] = out.pop("from_state")
        return out


@dataclass(frozen=True)
class Served:
    part: str
    from_state: PartState
    profile: str
    knobs: dict[str, Any]
    previous_defaults: dict[str, Any]
    override: str  # the user profile override the defaults were written to
    policy: str | None  # served on a policy call (a passed part), why
    takes_effect: TakesEffect
    at: float
    state: PartState = "served"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["from"] = out.pop("from_state")
        out["takes_effect"] = self.takes_effect.to_json()
        return out


@dataclass(frozen=True)
class Reverted:
    part: str
    from_state: PartState
    reason: str | None
    rule: dict[str, Any] | None  # the fired rule it rests on: run_kind, run_id, rules
    restored_defaults: dict[str, Any] | None
    override: str | None
    takes_effect: TakesEffect | None  # where defaults were restored
    at: float
    state: PartState = "reverted"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["from"] = out.pop("from_state")
        out["takes_effect"] = self.takes_effect.to_json() if self.takes_effect else None
        return out
