"""The task-suite format (docs/episodes.md): one TOML manifest naming agent tasks, their workspaces, limits,
graders and reference solutions. `check_suite` finds every problem and names it `file:line: field: reason`;
`load_suite` refuses a suite with any error, so nothing runs from a suite that is partly bad.

A task's workspace is either generated (`workspace = "generator:NAME"`, deterministic from the suite's
seed and scale: same seed, same bytes) or a fixture folder copied as it is (relative to the manifest).
Graders and references are programs beside the manifest; the agent never sees them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frank import tomlfile
from frank.errors import FrankError
from frank.workloads.format import CheckError, _is, format_errors, key_lines, read_toml

FORMAT = "frank-suite"
FORMAT_VERSION = 1
TOOLS = ("bash", "python", "text_editor")
LIMITS = ("max_turns", "max_tokens_per_turn", "wall_time_s", "grader_timeout_s")
LIMIT_MAX = {"max_turns": 1000, "max_tokens_per_turn": 1 << 20, "wall_time_s": 7 * 86400, "grader_timeout_s": 86400}
MAX_TASKS = 1000
DEFAULTS: dict[str, Any] = {
    "tools": list(TOOLS),
    "max_turns": 30,
    "max_tokens_per_turn": 4096,
    "wall_time_s": 1800,
    "grader_timeout_s": 120,
}
TASK_KEYS = frozenset(
    {
        "id",
        "title",
        "instruction",
        "instruction_file",
        "workspace",
        "expected",
        "grader",
        "reference",
        "adversarial",
        "tools",
        *LIMITS,
    }
)
TOP_KEYS = frozenset(
    {"format", "format_version", "name", "version", "description", "seed", "scale", "defaults", "tasks"}
)
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


def _positive_int(value: Any) -> bool:
    return _is(value, int) and value > 0


def check_suite(path: Path | str) -> tuple[Suite | None, list[CheckError]]:
    """Check a suite manifest and everything it names. Returns the suite (None on errors) and every error."""
    from frank.episodes.tasks import GENERATORS, SCALES

    mpath = Path(path).expanduser()
    if not mpath.is_file():
        return None, [CheckError(mpath, 0, "no such suite manifest")]
    text, data, bad = read_toml(mpath)
    if data is None:
        return None, bad
    try:
        tomlfile.check_plain(data, mpath, tomlfile.KeyLines(text), FrankError)
    except FrankError as exc:
        found = re.match(rf"{re.escape(str(mpath))}(?::(\d+))?: (.*)", str(exc), re.S)
        return None, [
            CheckError(mpath, int(found.group(1) or 0), found.group(2)) if found else CheckError(mpath, 0, str(exc))
        ]
    top, task_lines = key_lines(text, "tasks")
    _, default_lines = key_lines(text, "defaults")
    errors: list[CheckError] = []
    root = mpath.parent

    def inside(ref: Any) -> Path | None:
        """A file the manifest names, inside the suite's folder (else None: refused where it is named)."""
        return tomlfile.contained(root, ref) if isinstance(ref, str) else None

    def err(line: int, reason: str) -> None:
        errors.append(CheckError(mpath, line, reason))

    if data.get("format") != FORMAT:
        err(top.get("format", 1), f"format: expected {FORMAT!r}, got {data.get('format')!r}")
    version = data.get("format_version")
    if not _is(version, int) or version < 1:
        err(top.get("format_version", 1), f"format_version: expected a positive integer, got {version!r}")
    elif version > FORMAT_VERSION:
        err(top["format_version"], f"format_version {version} is newer than this frank reads ({FORMAT_VERSION})")
    for key in sorted(set(data) - TOP_KEYS):
        err(top.get(key, 1), f"{key}: unknown field")
    name = data.get("name")
    if not isinstance(name, str) or not _ID.match(name):
        err(top.get("name", 1), f"name: expected a name of letters, digits, '.', '_' or '-', got {name!r}")
    suite_version = data.get("version", 1)
    if not _positive_int(suite_version):
        err(top.get("version", 1), f"version: expected a positive integer, got {suite_version!r}")
    description = data.get("description", "")
    if not isinstance(description, str):
        err(top.get("description", 1), "description: expected a string")
    seed = data.get("seed", 1)
    if not _is(seed, int):
        err(top.get("seed", 1), f"seed: expected an integer, got {seed!r}")
    scale = data.get("scale", "mini")
    if scale not in SCALES:
        err(top.get("scale", 1), f"scale: expected one of {list(SCALES)}, got {scale!r}")

    defaults = dict(DEFAULTS)
    raw_defaults = data.get("defaults", {})
    dlines = default_lines[0] if default_lines else {"": top.get("defaults", 1)}
    if not isinstance(raw_defaults, dict):
        err(dlines[""], "defaults: expected a table")
        raw_defaults = {}
    for key, value in raw_defaults.items():
        line = dlines.get(key, dlines[""])
        problem = _field_problem(key, value)
        if key not in DEFAULTS:
            err(line, f"defaults.{key}: unknown field (known: {', '.join(DEFAULTS)})")
        elif problem:
            err(line, f"defaults.{key}: {problem}")
        else:
            defaults[key] = value

    raw_tasks = data.get("tasks")
    if not isinstance(raw_tasks, list) or not raw_tasks:
        err(top.get("tasks", 1), "tasks: expected at least one [[tasks]] entry")
        raw_tasks = []
    elif len(raw_tasks) > MAX_TASKS:
        err(top.get("tasks", 1), f"tasks: {len(raw_tasks)} tasks; at most {MAX_TASKS}")
        raw_tasks = []
    tasks: list[TaskSpec] = []
    seen: dict[str, int] = {}
    for k, entry in enumerate(raw_tasks):
        lines = task_lines[k] if k < len(task_lines) else {"": top.get("tasks", 1)}
        at = lambda key: lines.get(key, lines[""])  # noqa: B023, E731
        where = f"tasks[{k}]"
        if not isinstance(entry, dict):
            err(lines[""], f"{where}: expected a table")
            continue
        before = len(errors)
        for key in sorted(set(entry) - TASK_KEYS):
            err(at(key), f"{where}.{key}: unknown field")
        tid = entry.get("id")
        if not isinstance(tid, str) or not _ID.match(tid):
            err(at("id"), f"{where}.id: expected a name of letters, digits, '.', '_' or '-', got {tid!r}")
        elif tid in seen:
            err(at("id"), f"{where}.id: duplicate task id {tid!r} (first at line {seen[tid]})")
        else:
            seen[tid] = at("id")
        where = f"tasks[{k}] ({tid})" if isinstance(tid, str) else where
        instruction = entry.get("instruction")
        outside = "resolves outside the suite's folder (a suite names only files inside it)"
        if "instruction_file" in entry:
            ifile = entry["instruction_file"]
            ipath = inside(ifile)
            if instruction is not None:
                err(at("instruction_file"), f"{where}: give instruction or instruction_file, not both")
            elif isinstance(ifile, str) and ifile and ipath is None:
                err(at("instruction_file"), f"{where}.instruction_file: {ifile!r} {outside}")
            elif ipath is None or not ipath.is_file():
                err(at("instruction_file"), f"{where}.instruction_file: no such file {ifile!r}")
            else:
                try:
                    instruction = ipath.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    err(at("instruction_file"), f"{where}.instruction_file: cannot read {ifile!r}: {exc}")
        if not isinstance(instruction, str) or not instruction.strip():
            err(at("instruction"), f"{where}.instruction: expected a non-empty string")
        workspace = entry.get("workspace")
        if not isinstance(workspace, str) or not workspace:
            err(at("workspace"), f"{where}.workspace: expected 'generator:NAME' or a fixture folder")
        elif workspace.startswith(GENERATOR_PREFIX):
            if workspace[len(GENERATOR_PREFIX) :] not in GENERATORS:
                err(
                    at("workspace"),
                    f"{where}.workspace: unknown generator {workspace!r} (known: {', '.join(GENERATORS)})",
                )
        elif inside(workspace) is None:
            err(at("workspace"), f"{where}.workspace: {workspace!r} {outside}")
        elif not inside(workspace).is_dir():  # type: ignore[union-attr]
            err(at("workspace"), f"{where}.workspace: no such fixture folder {workspace!r}")
        else:
            workspace = str(inside(workspace))
        files: dict[str, Path | None] = {}
        for key, kind, needed in (
            ("expected", "file", ""),
            ("grader", "file", "every task needs a grader"),
            ("reference", "file or folder", "a reference solution proves the grader"),
            ("adversarial", "folder", ""),
        ):
            ref = entry.get(key)
            files[key] = None
            if ref is None and not needed:
                continue
            if not isinstance(ref, str) or not ref:
                err(
                    at(key) if key in lines else lines[""],
                    f"{where}.{key}: missing ({needed})" if needed else f"{where}.{key}: expected a path, got {ref!r}",
                )
                continue
            path = inside(ref)
            exists = {"file": Path.is_file, "folder": Path.is_dir, "file or folder": Path.exists}[kind]
            if path is None:
                err(at(key), f"{where}.{key}: {ref!r} {outside}")
            elif not exists(path):
                err(at(key), f"{where}.{key}: no such {kind} {ref!r}")
            else:
                files[key] = path
        values = dict(defaults)
        for key in ("tools", *LIMITS):
            if key in entry:
                problem = _field_problem(key, entry[key])
                if problem:
                    err(at(key), f"{where}.{key}: {problem}")
                else:
                    values[key] = entry[key]
        if len(errors) == before:
            tasks.append(
                TaskSpec(
                    tid,
                    str(entry.get("title", tid)),
                    instruction,
                    workspace,
                    files["grader"],
                    files["reference"],
                    files["expected"],
                    files["adversarial"],
                    tuple(values["tools"]),
                    values["max_turns"],
                    values["max_tokens_per_turn"],
                    values["wall_time_s"],
                    values["grader_timeout_s"],
                )
            )
    if errors:
        return None, errors
    return Suite(mpath.resolve(), name, suite_version, description, seed, scale, tuple(tasks)), []


def _field_problem(key: str, value: Any) -> str | None:
    if key == "tools":
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            return "expected a non-empty array of tool names"
        unknown = [v for v in value if v not in TOOLS]
        return f"unknown tool(s) {unknown} (known: {', '.join(TOOLS)})" if unknown else None
    if key in LIMITS and not _positive_int(value):
        return f"expected a positive integer, got {value!r}"
    if key in LIMITS and value > LIMIT_MAX[key]:
        return f"must be at most {LIMIT_MAX[key]}, got {value}"
    return None


def builtin_suites() -> dict[str, Path]:
    return {p.stem: p for p in sorted(BUILTIN_DIR.glob("*.toml"))}


def resolve_suite(spec: str | Path) -> Path:
    """A suite manifest from a path or a built-in name (w01-mini, w01-full)."""
    path = Path(spec).expanduser()
    if path.is_file():
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
