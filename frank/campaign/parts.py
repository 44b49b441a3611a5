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
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from frank import tomlfile
from frank.errors import FrankError

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

    @property
    def knob_dict(self) -> dict[str, Any]:
        return dict(self.knobs)

    def canonical(self) -> dict[str, Any]:
        return {
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

    @property
    def sha256(self) -> str:
        text = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"), default=str)
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


OUTSIDE = "resolves outside the campaign file's folder and the shipped designs (@designs/)"


def resolve_ref(campaign_path: Path, ref: str) -> Path | None:
    """`@designs/NAME` inside the shipped designs, or a path inside the campaign file's folder; else None."""
    if ref.startswith("@designs/"):
        return tomlfile.contained(DESIGNS_DIR, ref.removeprefix("@designs/"))
    return tomlfile.contained(campaign_path.parent, ref)


# -- locating fields for error messages ----------------------------------------------------------------


class _Lines:
    """Finds the line of a part's table (the n-th [[parts]]) and of a key inside it, for `file:line`."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.parts = [i + 1 for i, line in enumerate(self.lines) if line.strip().startswith("[[parts]]")]

    def part(self, index: int) -> int:
        return self.parts[index] if index < len(self.parts) else 0

    def key(self, index: int, key: str, nth: int = 0, table: str = "") -> int:
        start = self.part(index)
        if not start:
            return 0
        end = self.parts[index + 1] if index + 1 < len(self.parts) else len(self.lines) + 1
        seen = -1
        in_table = not table
        for number in range(start, end):
            line = self.lines[number - 1].strip()
            if table and line.startswith("["):
                in_table = line == f"[[parts.{table}]]"
                if in_table:
                    seen += 1
                    if not key and seen == nth:
                        return number  # the table's own header
                continue
            if not key:
                if in_table and seen == nth:
                    return number
                continue
            if in_table and (not table or seen == nth) and re.match(rf"{re.escape(key)}\s*=", line):
                return number
        return start


class _Reader:
    def __init__(self, path: Path, text: str) -> None:
        self.path, self.lines = path, _Lines(text)

    def error(self, line: int, field: str, message: str) -> CampaignError:
        where = f"{self.path}:{line}" if line else str(self.path)
        return CampaignError(f"{where}: {field}: {message}")

    def take(
        self, data: dict[str, Any], key: str, kind: type | tuple[type, ...], field: str, line: int, default: Any = ...
    ) -> Any:
        if key not in data:
            if default is ...:
                raise self.error(line, field, "missing required field")
            return default
        value = data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            names = {str: "a string", int: "an integer", float: "a number", dict: "a table", list: "an array"}
            raise self.error(
                line, field, f"expected {' or '.join(names.get(k, k.__name__) for k in kinds)}, got {value!r}"
            )
        return value

    @staticmethod
    def unknown(data: dict[str, Any], known: tuple[str, ...]) -> str | None:
        return next((k for k in data if k not in known), None)


_TOP = ("version", "name", "description", "parts")
_PART = ("name", "title", "profile", "knobs", "state", "design", "evidence", "revert_rules", "next", "notes")
_EVIDENCE = ("state", "date", "design", "results", "run", "policy", "note")
_RULE = ("name", "kind", "description", "max_drop", "floor", "measure", "max_worse_pct")


def parse_campaign_text(text: str, path: Path) -> Campaign:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"at line (\d+)", str(exc))
        line = found.group(1) if found else str(max(1, len(text.splitlines())))  # "at end of document"
        raise CampaignError(f"{path}:{line}: invalid TOML: {exc}") from None
    tomlfile.check_plain(data, path, tomlfile.KeyLines(text), CampaignError)
    r = _Reader(path, text)
    bad = r.unknown(data, _TOP)
    if bad:
        raise r.error(_line_of_top(text, bad), bad, f"unknown field (known: {', '.join(_TOP)})")
    version = r.take(data, "version", int, "version", _line_of_top(text, "version"))
    if version != VERSION:
        raise r.error(
            _line_of_top(text, "version"),
            "version",
            f"{version} is not a version this frank reads (it reads {VERSION})",
        )
    name = r.take(data, "name", str, "name", _line_of_top(text, "name"))
    raw_parts = r.take(data, "parts", list, "parts", 0, [])
    parts: list[Part] = []
    for i, raw in enumerate(raw_parts):
        part = _parse_part(r, raw, i)
        if any(p.name == part.name for p in parts):
            raise r.error(r.lines.key(i, "name"), f"parts[{i}].name", f"{part.name!r} names two parts")
        parts.append(part)
    return Campaign(
        path=path,
        name=name,
        description=r.take(data, "description", str, "description", 0, ""),
        version=version,
        parts=tuple(parts),
        sha256=hashlib.sha256(text.encode()).hexdigest(),
    )


def _line_of_top(text: str, key: str) -> int:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip().startswith("["):
            return 0
        if re.match(rf"\s*{re.escape(key)}\s*=", line):
            return number
    return 0


def _parse_part(r: _Reader, raw: Any, i: int) -> Part:
    at = f"parts[{i}]"
    line = r.lines.part(i)
    if not isinstance(raw, dict):
        raise r.error(line, at, "expected a table")
    bad = r.unknown(raw, _PART)
    if bad:
        raise r.error(r.lines.key(i, bad), f"{at}.{bad}", f"unknown field (known: {', '.join(_PART)})")
    key = lambda k: r.lines.key(i, k)  # noqa: E731
    name = r.take(raw, "name", str, f"{at}.name", key("name"))
    if not NAME.match(name):
        raise r.error(
            key("name"), f"{at}.name", f"{name!r}: use letters, digits, _ . - (starting with a letter or digit)"
        )
    state = r.take(raw, "state", str, f"{at}.state", key("state"))
    if state not in STATES:
        raise r.error(key("state"), f"{at}.state", f"{state!r} is not one of: {', '.join(STATES)}")
    knobs = r.take(raw, "knobs", dict, f"{at}.knobs", key("knobs"), {})
    for k, v in knobs.items():
        if not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise r.error(key("knobs"), f"{at}.knobs.{k}", f"expected a string or number, got {v!r}")
    evidence = []
    for j, ev in enumerate(r.take(raw, "evidence", list, f"{at}.evidence", key("evidence"), [])):
        evidence.append(_parse_evidence(r, ev, i, j))
    rules = []
    for j, rule in enumerate(r.take(raw, "revert_rules", list, f"{at}.revert_rules", key("revert_rules"), [])):
        parsed = _parse_rule(r, rule, i, j)
        if any(x.name == parsed.name for x in rules):
            raise r.error(
                r.lines.key(i, "name", j, "revert_rules"),
                f"{at}.revert_rules[{j}].name",
                f"{parsed.name!r} names two rules of this part",
            )
        rules.append(parsed)
    design_ref = r.take(raw, "design", str, f"{at}.design", key("design"), "")
    _check_ref(r, design_ref, f"{at}.design", key("design"))
    part = Part(
        name=name,
        title=r.take(raw, "title", str, f"{at}.title", key("title"), ""),
        profile=r.take(raw, "profile", str, f"{at}.profile", key("profile")),
        knobs=tuple(sorted(knobs.items())),
        state=state,
        design=design_ref,
        evidence=tuple(evidence),
        revert_rules=tuple(rules),
        next=r.take(raw, "next", str, f"{at}.next", key("next"), ""),
        notes=r.take(raw, "notes", str, f"{at}.notes", key("notes"), ""),
        line=line,
    )
    _check_declared_state(r, part, i)
    return part


def _sub_table(r: _Reader, raw: Any, i: int, j: int, table: str, known: tuple[str, ...]) -> tuple[str, int]:
    """parts[i].table[j]: its field path and line, after checking it is a table of known fields."""
    at = f"parts[{i}].{table}[{j}]"
    line = r.lines.key(i, "", j, table)
    if not isinstance(raw, dict):
        raise r.error(line, at, "expected a table")
    bad = r.unknown(raw, known)
    if bad:
        raise r.error(r.lines.key(i, bad, j, table), f"{at}.{bad}", f"unknown field (known: {', '.join(known)})")
    return at, line


def _parse_evidence(r: _Reader, raw: Any, i: int, j: int) -> Evidence:
    at, line = _sub_table(r, raw, i, j, "evidence", _EVIDENCE)
    values = {k: r.take(raw, k, str, f"{at}.{k}", r.lines.key(i, k, j, "evidence"), "") for k in _EVIDENCE}
    if values["state"] not in STATES:
        raise r.error(
            r.lines.key(i, "state", j, "evidence"),
            f"{at}.state",
            f"{values['state']!r} is not one of: {', '.join(STATES)}",
        )
    for k in ("design", "results"):
        _check_ref(r, values[k], f"{at}.{k}", r.lines.key(i, k, j, "evidence"))
    sources = [k for k in ("results", "run", "policy") if values[k]]
    if len(sources) != 1:
        raise r.error(
            line,
            at,
            "give exactly one of results (a CSV decided by the design's rule), run (a "
            "registered run id) or policy (a policy call, in words)",
        )
    return Evidence(**values)


def _check_ref(r: _Reader, ref: str, field: str, line: int) -> None:
    if ref and resolve_ref(r.path, ref) is None:
        raise r.error(line, field, f"{ref!r} {OUTSIDE}")


def _parse_rule(r: _Reader, raw: Any, i: int, j: int) -> RevertRule:
    at, _ = _sub_table(r, raw, i, j, "revert_rules", _RULE)
    key = lambda k: r.lines.key(i, k, j, "revert_rules")  # noqa: E731
    name = r.take(raw, "name", str, f"{at}.name", key("name"))
    kind = r.take(raw, "kind", str, f"{at}.kind", key("kind"))
    if kind not in RULE_KINDS:
        raise r.error(key("kind"), f"{at}.kind", f"{kind!r} is not one of: {', '.join(RULE_KINDS)}")
    rule = RevertRule(
        name=name,
        kind=kind,
        description=r.take(raw, "description", str, f"{at}.description", key("description"), ""),
        max_drop=float(r.take(raw, "max_drop", (int, float), f"{at}.max_drop", key("max_drop"), 0.0)),
        floor=float(r.take(raw, "floor", (int, float), f"{at}.floor", key("floor"), 0.0)),
        measure=r.take(raw, "measure", str, f"{at}.measure", key("measure"), ""),
        max_worse_pct=float(
            r.take(raw, "max_worse_pct", (int, float), f"{at}.max_worse_pct", key("max_worse_pct"), 0.0)
        ),
    )
    if kind == "measure_worse" and rule.measure not in LOWER_IS_BETTER | HIGHER_IS_BETTER:
        raise r.error(
            key("measure"),
            f"{at}.measure",
            f"{rule.measure!r}: measure_worse needs one of {', '.join(sorted(LOWER_IS_BETTER | HIGHER_IS_BETTER))}",
        )
    if kind != "measure_worse" and "measure" in raw:
        raise r.error(key("measure"), f"{at}.measure", "only a measure_worse rule names a measure")
    if not 0.0 <= rule.max_drop < 1.0:
        raise r.error(key("max_drop"), f"{at}.max_drop", "a fraction of the control's pass rate, 0 <= x < 1")
    if rule.floor < 0:
        raise r.error(key("floor"), f"{at}.floor", "must be 0 or more")
    return rule


def _check_declared_state(r: _Reader, part: Part, i: int) -> None:
    """A declared state beyond `testing` names the evidence that put it there (checked by `status`)."""
    if part.state in ("candidate", "testing"):
        return
    if not any(e.state == part.state for e in part.evidence):
        raise r.error(
            r.lines.key(i, "state"),
            f"parts[{i}].state",
            f"{part.state!r} needs an evidence entry with state = {part.state!r} (the run, results or "
            f"policy call that put the part there)",
        )
    if part.state in ("passed", "adopted", "rejected") and not part.design:
        raise r.error(
            r.lines.key(i, "state"),
            f"parts[{i}].design",
            f"a part that is {part.state} names the design of the test that "
            f"{'turned it down' if part.state == 'rejected' else 'admitted it'}",
        )


def load_campaign(path: Path | str) -> Campaign:
    path = Path(path).expanduser()
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise CampaignError(f"{path}: no campaign file (create one with `frank campaign init`)") from None
    except OSError as exc:
        raise CampaignError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_campaign_text(text, path)


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
