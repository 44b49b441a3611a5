"""The task-suite format (docs/episodes.md): one TOML manifest naming agent tasks, their workspaces, limits,
graders and reference solutions. `check_suite` finds every problem and names it `file:line: field: reason`;
`load_suite` refuses a suite with any error, so nothing runs from a suite that is partly bad.

A task's workspace is either generated (`workspace = "generator:NAME"`, deterministic from the suite's
seed and scale: same seed, same bytes) or a fixture folder copied as it is (relative to the manifest).
Graders and references are programs beside the manifest; the agent never sees them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, ValidationInfo, field_validator, model_validator

from frank import readfile, tomlfile
from frank.errors import FrankError
from frank.workloads.format import CheckError, Manifest, check_manifest, format_errors, read_toml

FORMAT = "frank-suite"
FORMAT_VERSION = 1
TOOLS = ("bash", "python", "text_editor")
LIMITS = ("max_turns", "max_tokens_per_turn", "wall_time_s", "grader_timeout_s")
LIMIT_MAX = {"max_turns": 1000, "max_tokens_per_turn": 1 << 20, "wall_time_s": 7 * 86400, "grader_timeout_s": 86400}
MAX_TASKS = 1000


@dataclass(frozen=True)
class Limits:
    """A task's tools and limits, after [defaults] and the task's own."""

    tools: tuple[str, ...]
    max_turns: int
    max_tokens_per_turn: int
    wall_time_s: int
    grader_timeout_s: int


DEFAULTS = Limits(tools=TOOLS, max_turns=30, max_tokens_per_turn=4096, wall_time_s=1800, grader_timeout_s=120)
GENERATOR_PREFIX = "generator:"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
BUILTIN_DIR = Path(__file__).resolve().parent / "suites"


@dataclass(frozen=True)
class TaskSpec:
    id: str
    title: str
    instruction: str
    workspace: str  # "generator:NAME" or an absolute fixture folder
    grader: Path
    reference: Path
    expected: Path | None  # fixture workspaces: the grader's hidden answer (JSON), if any
    adversarial: Path | None  # a folder of attempts that must fail (programs run in the workspace)
    tools: tuple[str, ...]
    max_turns: int
    max_tokens_per_turn: int
    wall_time_s: int
    grader_timeout_s: int

    @property
    def generator(self) -> str | None:
        return self.workspace[len(GENERATOR_PREFIX) :] if self.workspace.startswith(GENERATOR_PREFIX) else None


@dataclass(frozen=True)
class Suite:
    path: Path  # the manifest
    name: str
    version: int  # the suite's own version: bumped when a task, grader or generator changes
    description: str
    seed: int
    scale: str
    tasks: tuple[TaskSpec, ...]

    def task(self, task_id: str) -> TaskSpec:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise FrankError(f"{self.path}: no task {task_id!r} (tasks: {', '.join(t.id for t in self.tasks)})")


OUTSIDE = "resolves outside the suite's folder (a suite names only files inside it)"


def _inside(ref: str, info: ValidationInfo, kind: str) -> Path:
    """A file or folder the manifest names, inside the suite's folder (the validation context's root)."""
    path = tomlfile.contained(info.context["root"], ref)
    if path is None:
        raise ValueError(f"{ref!r} {OUTSIDE}")
    exists = {"file": Path.is_file, "folder": Path.is_dir, "file or folder": Path.exists}[kind]
    if not exists(path):
        raise ValueError(f"no such {kind} {ref!r}")
    return path


class _Limits(tomlfile.Strict):
    """What [defaults] sets and a task may set again: its tools and limits."""

    tools: list[str] | None = None
    max_turns: int | None = None
    max_tokens_per_turn: int | None = None
    wall_time_s: int | None = None
    grader_timeout_s: int | None = None

    @field_validator("tools", *LIMITS)
    @classmethod
    def _limit(cls, value: Any, info: ValidationInfo) -> Any:
        problem = _field_problem(info.field_name or "", value)
        if problem:
            raise ValueError(problem)
        return value

    def over(self, base: Limits) -> Limits:
        """`base` with what this table sets."""
        set_here: dict[str, Any] = {k: getattr(self, k) for k in ("tools", *LIMITS) if getattr(self, k) is not None}
        if "tools" in set_here:
            set_here["tools"] = tuple(set_here["tools"])
        return replace(base, **set_here)


class _Task(_Limits):
    id: str
    title: str = ""
    instruction: str | None = None
    instruction_file: str | None = None
    workspace: str
    expected: str | None = None
    grader: str
    reference: str
    adversarial: str | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError(f"expected a name of letters, digits, '.', '_' or '-', got {value!r}")
        return value

    @field_validator("instruction")
    @classmethod
    def _instruction(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("expected a non-empty string")
        return value

    @field_validator("instruction_file")
    @classmethod
    def _instruction_file(cls, value: str, info: ValidationInfo) -> str:
        try:
            readfile.read_text(_inside(value, info, "file"), readfile.TEXT)
        except readfile.ReadError as exc:
            raise ValueError(f"cannot read {value!r}: {exc.reason}") from None
        return str(_inside(value, info, "file"))

    @field_validator("workspace")
    @classmethod
    def _workspace(cls, value: str, info: ValidationInfo) -> str:
        from frank.episodes.tasks import GENERATORS

        if value.startswith(GENERATOR_PREFIX):
            if value[len(GENERATOR_PREFIX) :] not in GENERATORS:
                raise ValueError(f"unknown generator {value!r} (known: {', '.join(GENERATORS)})")
            return value
        try:
            return str(_inside(value, info, "folder"))
        except ValueError as exc:
            raise ValueError(str(exc).replace("no such folder", "no such fixture folder")) from None

    @field_validator("expected", "grader")
    @classmethod
    def _file(cls, value: str, info: ValidationInfo) -> str:
        return str(_inside(value, info, "file"))

    @field_validator("reference")
    @classmethod
    def _reference(cls, value: str, info: ValidationInfo) -> str:
        return str(_inside(value, info, "file or folder"))

    @field_validator("adversarial")
    @classmethod
    def _adversarial(cls, value: str, info: ValidationInfo) -> str:
        return str(_inside(value, info, "folder"))

    @model_validator(mode="after")
    def _one_instruction(self) -> _Task:
        if (self.instruction is None) == (self.instruction_file is None):
            raise ValueError("give instruction or instruction_file (one of them)")
        return self

    def spec(self, defaults: Limits) -> TaskSpec:
        values = self.over(defaults)
        text = self.instruction or readfile.read_text(self.instruction_file or "", readfile.TEXT)
        maybe = lambda ref: Path(ref) if ref else None  # noqa: E731
        return TaskSpec(
            self.id,
            self.title or self.id,
            text,
            self.workspace,
            Path(self.grader),
            Path(self.reference),
            maybe(self.expected),
            maybe(self.adversarial),
            values.tools,
            values.max_turns,
            values.max_tokens_per_turn,
            values.wall_time_s,
            values.grader_timeout_s,
        )


class _SuiteManifest(Manifest):
    FORMAT: ClassVar[str] = FORMAT
    FORMAT_VERSION: ClassVar[int] = FORMAT_VERSION
    version: Any = 1  # the suite's own version
    seed: int = 1
    scale: str = "mini"
    defaults: _Limits = Field(default_factory=_Limits)
    tasks: list[_Task] = Field(min_length=1, max_length=MAX_TASKS)

    @field_validator("version")
    @classmethod
    def _version(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"expected a positive integer, got {value!r}")
        return value

    @field_validator("scale")
    @classmethod
    def _scale(cls, value: str) -> str:
        from frank.episodes.tasks import SCALES

        if value not in SCALES:
            raise ValueError(f"expected one of {list(SCALES)}, got {value!r}")
        return value


def check_suite(path: Path | str) -> tuple[Suite | None, list[CheckError]]:
    """Check a suite manifest and everything it names. Returns the suite (None on errors) and every error."""
    mpath = Path(path).expanduser()
    if not mpath.exists():
        return None, [CheckError(mpath, 0, "no such suite manifest")]
    manifest, errors = check_manifest(_SuiteManifest, mpath, root=mpath.parent)
    errors += _duplicate_ids(mpath)
    if manifest is None or errors:
        return None, errors
    defaults = manifest.defaults.over(DEFAULTS)
    tasks = tuple(task.spec(defaults) for task in manifest.tasks)
    return Suite(
        mpath.resolve(), manifest.name, manifest.version, manifest.description, manifest.seed, manifest.scale, tasks
    ), []


def _duplicate_ids(mpath: Path) -> list[CheckError]:
    text, data, _ = read_toml(mpath)
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, list):
        return []
    lines = tomlfile.KeyLines(text)
    seen: dict[str, int] = {}
    out = []
    for k, task in enumerate(tasks):
        tid = task.get("id") if isinstance(task, dict) else None
        if not isinstance(tid, str):
            continue
        line = lines.line(("tasks", k, "id"))
        if tid in seen:
            out.append(CheckError(mpath, line, f"tasks[{k}].id: duplicate task id {tid!r} (first at line {seen[tid]})"))
        seen.setdefault(tid, line)
    return out


def _field_problem(key: str, value: Any) -> str | None:
    if key == "tools":
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            return "expected a non-empty array of tool names"
        unknown = [v for v in value if v not in TOOLS]
        return f"unknown tool(s) {unknown} (known: {', '.join(TOOLS)})" if unknown else None
    if key in LIMITS and value < 1:
        return f"expected a positive integer, got {value!r}"
    if key in LIMITS and value > LIMIT_MAX[key]:
        return f"must be at most {LIMIT_MAX[key]}, got {value}"
    return None


def builtin_suites() -> dict[str, Path]:
    return {p.stem: p for p in sorted(BUILTIN_DIR.glob("*.toml"))}


def resolve_suite(spec: str | Path) -> Path:
    """A suite manifest from a path or a built-in name (w01-mini, w01-full)."""
    path = Path(spec).expanduser()
    if path.exists() and not path.is_dir():  # a file: the bounded reader says what is wrong with it, if anything
        return path
    if path.is_dir() and (path / "suite.toml").is_file():
        return path / "suite.toml"
    builtins = builtin_suites()
    if str(spec) in builtins:
        return builtins[str(spec)]
    raise FrankError(f"no suite {spec!r}: not a manifest file and not a built-in ({', '.join(builtins)})")


def load_suite(spec: str | Path) -> Suite:
    """Check and load a suite; any error raises FrankError listing them, and nothing runs."""
    path = resolve_suite(spec)
    suite, errors = check_suite(path)
    if suite is None:
        raise FrankError(f"suite {path} has {len(errors)} error(s); nothing was run:\n" + format_errors(errors, 30))
    return suite
