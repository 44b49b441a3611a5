"""What the campaign's headless actions return (frank.campaign.actions): frozen records the CLI and the
console read by field; `--json` prints their `to_json()`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from frank.campaign.parts import PartState

if TYPE_CHECKING:
    from frank.campaign.evidence import EvidenceEntry


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


@dataclass(frozen=True)
class LastCheck:
    """A revert rule's latest check: what it found, on which run."""

    outcome: str
    detail: str
    run_kind: str
    run_id: str
    at: float


@dataclass(frozen=True)
class RuleStatus:
    name: str
    kind: str
    description: str
    params: dict[str, float | str]  # the rule's own settings that are set (max_drop, floor, measure, ...)
    last_check: LastCheck | None

    @property
    def fired(self) -> bool:
        return self.last_check is not None and self.last_check.outcome == "fired"


@dataclass(frozen=True)
class ServedDefaults:
    """Whether the profile, as it loads now, starts with a served part's knob values."""

    ok: bool
    detail: str


@dataclass(frozen=True)
class FiredCheck:
    """A check since the part was served whose rules fired."""

    run_kind: str
    run_id: str
    rules: tuple[str, ...]
    at: float


@dataclass(frozen=True)
class AwaitStatus:
    """A file a part awaits (its [[parts.awaits]]): where it goes, whether it is there, what makes it."""

    file: str  # as the campaign file names it
    path: str  # resolved
    there: bool
    made_by: str
    what: str

    def describe(self) -> str:
        """In words: the file, what it is, and whether it is here or which command makes it."""
        what = f" ({self.what})" if self.what else ""
        if self.there:
            return f"{self.file}{what}: here"
        return f"{self.file}{what}: not made yet; made by {self.made_by}"


@dataclass(frozen=True)
class PartStatus:
    """One part as it stands: state, evidence (each entry as frank.campaign.evidence gives it), revert rules
    and what comes next. `to_json` keeps the keys `frank campaign status --json` has always printed."""

    name: str
    title: str
    state: PartState
    declared_state: PartState
    served_defaults: ServedDefaults | None
    profile: str
    knobs: dict[str, Any]
    design: str
    design_sha256: str | None
    evidence: tuple[EvidenceEntry, ...]
    evidence_ok: bool
    runs: tuple[dict[str, Any], ...]  # registered runs of its design, each decided
    revert_rules: tuple[RuleStatus, ...]
    fired: tuple[FiredCheck, ...]
    up_next: str
    next: str
    notes: str
    recorded: bool  # in the history (a part added to the file since is recorded by the next change)
    awaiting: tuple[AwaitStatus, ...] = ()  # the files it awaits (none there: no decision yet)

    @property
    def awaits_evidence(self) -> bool:
        """Some awaited file is not there yet."""
        return any(not a.there for a in self.awaiting)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {
            "awaiting": [asdict(a) for a in self.awaiting],
            "evidence": list(self.evidence),
            "runs": list(self.runs),
            "revert_rules": [asdict(r) for r in self.revert_rules],
            "fired": [asdict(f) | {"rules": list(f.rules)} for f in self.fired],
        }


@dataclass(frozen=True)
class CampaignStatus:
    file: str
    history: str
    name: str
    description: str
    version: int
    parts: tuple[PartStatus, ...]
    pending_checks: tuple[dict[str, Any], ...]  # checks the watch has not recorded yet (history events)
    alerts: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {
            "parts": [p.to_json() for p in self.parts],
            "pending_checks": list(self.pending_checks),
            "alerts": list(self.alerts),
        }


@dataclass(frozen=True)
class CampaignHistory:
    file: str
    history: str
    events: tuple[dict[str, Any], ...]  # the history file's events, oldest first

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"events": list(self.events)}
