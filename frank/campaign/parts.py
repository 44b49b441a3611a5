"""The campaign file (TOML, versioned): parts, the change each makes, the evidence for its state, its
revert rules, free notes. docs/campaign.md is the reference; frank/campaign/examples/seed.toml ships the
seed's three parts.

The file declares where each part stood when it was written. From `frank campaign init` on, every state
change is an event in the history (history.py), and a part once recorded is frozen: its change, design,
evidence and rules are hashed at init, and a file edited under them is refused (add a new part instead).
Errors name the file, the line where it can be found, and the field: `campaign.toml:12: parts[1].state: ...`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import Field, ValidationInfo, field_validator, model_validator

from frank import tomlfile
from frank.errors import FrankError

if TYPE_CHECKING:
    from frank.engine.profiles import KnobValue

VERSION = 1
# rejected: its registered test did not confirm it and the campaign turned it down (declared in the file on
# that run's exported results; status decides them again and wants "not confirmed").
# A part's state: declared in the file, then moved on by the history (adopt, serve, revert).
PartState = Literal["candidate", "testing", "passed", "adopted", "served", "reverted", "rejected"]
STATES: tuple[PartState, ...] = get_args(PartState)
RULE_KINDS = ("treatment_only_failures", "pass_rate_drop", "fidelity_regression", "measure_worse")
# Measures the watch can compare, and which way is better.
LOWER_IS_BETTER = {"time_per_verify_step", "front_end_per_draw", "total_replay_time", "kl"}
HIGHER_IS_BETTER = {"tokens_per_s"}
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
DESIGNS_DIR = Path(__file__).resolve().parents[1] / "experiments" / "designs"
SCREENS_DIR = Path(__file__).resolve().parents[1] / "experiments" / "screens"
EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"


class CampaignError(FrankError, ValueError):
    """The campaign file or a command on it is wrong; the message names the file, line and field."""


@dataclass(frozen=True)
class Evidence:
    state: PartState  # the state this evidence justifies
    date: str = ""
    design: str = ""  # the design whose rule decided (default: the part's design)
    results: str = ""  # measures taken elsewhere (CSV), decided with `frank experiment analyze`
    run: str = ""  # a registered run of the design
    policy: str = ""  # a policy call (served without adoption), in words
    note: str = ""


@dataclass(frozen=True)
class Awaited:
    """Evidence a part waits for: a file that is not made yet, and the command that makes it. Status says so
    (never a decision) until the file is there; then a CSV is decided again by the part's design, as a
    test's outcome (`testing`), until the file records it as evidence of its own."""

    file: str  # `@designs/NAME`, `@screens/NAME`, or relative to the campaign file
    made_by: str  # the command (or script) that makes it, in words
    what: str = ""  # what the file is


@dataclass(frozen=True)
class RevertRule:
    name: str
    kind: str
    description: str = ""
    max_drop: float = 0.0  # pass_rate_drop: fraction of the control's pass rate
    floor: float = 0.0  # fidelity_regression: KL above the control's beyond which it fires
    measure: str = ""  # measure_worse: which measure
    max_worse_pct: float = 0.0  # measure_worse: percent worse than the control beyond which it fires


@dataclass(frozen=True)
class Part:
    name: str
    title: str
    profile: str
    knobs: tuple[tuple[str, Any], ...]
    state: PartState  # as declared in the file (the history moves it on)
    design: str  # the admission test: `adopt` needs a confirmed registered run of it
    evidence: tuple[Evidence, ...]
    revert_rules: tuple[RevertRule, ...]
    next: str = ""
    notes: str = ""
    line: int = 0  # where its [[parts]] table starts
    awaits: tuple[Awaited, ...] = ()  # evidence not made yet (a candidate or testing part only)

    @property
    def knob_dict(self) -> dict[str, KnobValue]:
        return dict(self.knobs)

    def canonical_json(self) -> str:
        """The part as the JSON text its sha256 is taken over."""
        fields = {
            "name": self.name,
            "title": self.title,
            "profile": self.profile,
            "knobs": self.knob_dict,
            "state": self.state,
            "design": self.design,
            "evidence": [e.__dict__ for e in self.evidence],
            "revert_rules": [r.__dict__ for r in self.revert_rules],
            "next": self.next,
            "notes": self.notes,
        }
        if self.awaits:  # only when there are some: parts recorded before the field keep their hash
            fields["awaits"] = [a.__dict__ for a in self.awaits]
        return json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)

    @property
    def sha256(self) -> str:
        text = self.canonical_json()
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Campaign:
    path: Path
    name: str
    description: str
    version: int
    parts: tuple[Part, ...]
    sha256: str  # of the file's bytes

    def part(self, name: str) -> Part:
        for p in self.parts:
            if p.name == name:
                return p
        raise CampaignError(
            f"{self.path}: no part named {name!r} (parts: {', '.join(p.name for p in self.parts) or 'none'})"
        )

    def resolve(self, ref: str) -> Path:
        """A file named by the campaign: `@designs/NAME` (inside the shipped designs) or relative to the
        campaign file's folder (inside it); anything else was refused when the file was read."""
        path = resolve_ref(self.path, ref)
        if path is None:
            raise CampaignError(f"{self.path}: {ref!r} {OUTSIDE}")
        return path


OUTSIDE = "resolves outside the campaign file's folder, the shipped designs (@designs/) and screens (@screens/)"


def resolve_ref(campaign_path: Path, ref: str) -> Path | None:
    """`@designs/NAME` inside the shipped designs, `@screens/NAME` inside the shipped screens, or a path inside
    the campaign file's folder; else None."""
    if ref.startswith("@designs/"):
        return tomlfile.contained(DESIGNS_DIR, ref.removeprefix("@designs/"))
    if ref.startswith("@screens/"):
        return tomlfile.contained(SCREENS_DIR, ref.removeprefix("@screens/"))
    return tomlfile.contained(campaign_path.parent, ref)


# -- the file's schema (frank.tomlfile: strict types, unknown fields refused, each refusal at its line) ---------


def _one_of(value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{value!r} is not one of: {', '.join(allowed)}")
    return value


class _EvidenceSchema(tomlfile.Strict):
    state: str
    date: str = ""
    design: str = ""
    results: str = ""
    run: str = ""
    policy: str = ""
    note: str = ""

    _state = field_validator("state")(lambda v: _one_of(v, STATES))

    @model_validator(mode="after")
    def _one_source(self) -> _EvidenceSchema:
        if sum(1 for k in (self.results, self.run, self.policy) if k) != 1:
            raise ValueError(
                "give exactly one of results (a CSV decided by the design's rule), run (a registered run id) "
                "or policy (a policy call, in words)"
            )
        return self


class _AwaitsSchema(tomlfile.Strict):
    file: str
    made_by: str
    what: str = ""

    @field_validator("file", "made_by")
    @classmethod
    def _given(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value


class _RuleSchema(tomlfile.Strict):
    name: str
    kind: str
    description: str = ""
    max_drop: float = 0.0  # pass_rate_drop: fraction of the control's pass rate
    floor: float = 0.0  # fidelity_regression: KL above the control's beyond which it fires
    measure: str = Field("", validate_default=True)  # measure_worse: which measure
    max_worse_pct: float = 0.0  # measure_worse: percent worse than the control beyond which it fires

    _kind = field_validator("kind")(lambda v: _one_of(v, RULE_KINDS))

    @field_validator("max_drop")
    @classmethod
    def _max_drop(cls, value: float) -> float:
        if not 0.0 <= value < 1.0:
            raise ValueError("a fraction of the control's pass rate, 0 <= x < 1")
        return value

    @field_validator("floor")
    @classmethod
    def _floor(cls, value: float) -> float:
        if value < 0:
            raise ValueError("must be 0 or more")
        return value

    @field_validator("measure")
    @classmethod
    def _measure(cls, value: str, info: ValidationInfo) -> str:
        kind = info.data.get("kind")
        known = LOWER_IS_BETTER | HIGHER_IS_BETTER
        if kind == "measure_worse" and value not in known:
            raise ValueError(f"{value!r}: measure_worse needs one of {', '.join(sorted(known))}")
        if kind not in (None, "measure_worse") and value:
            raise ValueError("only a measure_worse rule names a measure")
        return value


class _PartSchema(tomlfile.Strict):
    name: str
    title: str = ""
    profile: str
    knobs: dict[str, str | int | float] = Field(default_factory=dict)
    state: str
    design: str = ""
    evidence: list[_EvidenceSchema] = Field(default_factory=list)
    revert_rules: list[_RuleSchema] = Field(default_factory=list)
    awaits: list[_AwaitsSchema] = Field(default_factory=list)
    next: str = ""
    notes: str = ""

    _state = field_validator("state")(lambda v: _one_of(v, STATES))

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not NAME.match(name):
            raise ValueError(f"{name!r}: use letters, digits, _ . - (starting with a letter or digit)")
        return name


class _CampaignSchema(tomlfile.Strict):
    version: int
    name: str
    description: str = ""
    parts: list[_PartSchema] = Field(default_factory=list)

    @field_validator("version")
    @classmethod
    def _version(cls, version: int) -> int:
        if version != VERSION:
            raise ValueError(f"{version} is not a version this frank reads (it reads {VERSION})")
        return version


def parse_campaign_text(text: str, path: Path) -> Campaign:
    data = tomlfile.parse(text, path, CampaignError)
    lines = tomlfile.KeyLines(text)
    tomlfile.check_plain(data, path, lines, CampaignError)
    schema = tomlfile.validate(_CampaignSchema, data, path, lines, CampaignError)

    def refuse(field: tuple[str | int, ...], message: str) -> CampaignError:
        return tomlfile.refusal(CampaignError, path, lines, field, message)  # type: ignore[return-value]

    parts: list[Part] = []
    for i, raw in enumerate(schema.parts):
        if any(p.name == raw.name for p in parts):
            raise refuse(("parts", i, "name"), f"{raw.name!r} names two parts")
        for j, rule in enumerate(raw.revert_rules):
            if any(r.name == rule.name for r in raw.revert_rules[:j]):
                raise refuse(("parts", i, "revert_rules", j, "name"), f"{rule.name!r} names two rules of this part")
        refs = [(("parts", i, "design"), raw.design)]
        refs += [
            (("parts", i, "evidence", j, k), getattr(e, k))
            for j, e in enumerate(raw.evidence)
            for k in ("design", "results")
        ]
        refs += [(("parts", i, "awaits", j, "file"), a.file) for j, a in enumerate(raw.awaits)]
        for field, ref in refs:
            if ref and resolve_ref(path, ref) is None:
                raise refuse(field, f"{ref!r} {OUTSIDE}")
        part = Part(
            name=raw.name,
            title=raw.title,
            profile=raw.profile,
            knobs=tuple(sorted(raw.knobs.items())),
            state=raw.state,
            design=raw.design,
            evidence=tuple(Evidence(**e.model_dump()) for e in raw.evidence),
            revert_rules=tuple(RevertRule(**r.model_dump()) for r in raw.revert_rules),
            next=raw.next,
            notes=raw.notes,
            line=lines.line(("parts", i)),
            awaits=tuple(Awaited(**a.model_dump()) for a in raw.awaits),
        )
        problem = _declared_state_problem(part)
        if problem:
            raise refuse(("parts", i, problem[0]), problem[1])
        parts.append(part)
    return Campaign(
        path=path,
        name=schema.name,
        description=schema.description,
        version=schema.version,
        parts=tuple(parts),
        sha256=hashlib.sha256(text.encode()).hexdigest(),
    )


def _declared_state_problem(part: Part) -> tuple[str, str] | None:
    """A declared state beyond `testing` names the evidence that put it there (checked by `status`)."""
    if part.state in ("candidate", "testing"):
        return None
    if part.awaits:
        return "awaits", (
            f"a part that is {part.state} has its evidence: only a candidate or testing part awaits a file "
            f"(record the file as evidence: [[parts.evidence]] results = ...)"
        )
    if not any(e.state == part.state for e in part.evidence):
        return "state", (
            f"{part.state!r} needs an evidence entry with state = {part.state!r} (the run, results or "
            f"policy call that put the part there)"
        )
    if part.state in ("passed", "adopted", "rejected") and not part.design:
        verb = "turned it down" if part.state == "rejected" else "admitted it"
        return "design", f"a part that is {part.state} names the design of the test that {verb}"
    return None


def load_campaign(path: Path | str) -> Campaign:
    path = Path(path).expanduser()
    if not path.exists():
        raise CampaignError(f"{path}: no campaign file (create one with `frank campaign init`)")
    return parse_campaign_text(tomlfile.read_text(path, CampaignError), path)


def example_path(name: str) -> Path:
    path = EXAMPLES_DIR / f"{name}.toml"
    if not path.is_file():
        names = sorted(p.stem for p in EXAMPLES_DIR.glob("*.toml"))
        raise CampaignError(f"no example campaign {name!r} (examples: {', '.join(names)})")
    return path


EMPTY = f"""# A frank campaign: the parts of the server, each admitted through a registered test.
# Reference: docs/campaign.md. States change only through `frank campaign adopt|serve|revert`.
version = {VERSION}
name = "campaign"
description = ""

# [[parts]]
# name = "my-part"
# title = "what it changes"
# profile = "embedded-cpu"
# knobs = {{ region_cache = "on" }}
# state = "candidate"
# design = "my-design.toml"        # the registered test that admits it
"""
