"""The workload format (docs/workload-format.md): a folder with a TOML manifest and one JSONL file per draw.

A line of a draw file is one recorded request: `id`, `task`, `episode`, `turn`, `offset_s` and `body`, the
OpenAI chat-completions request body as sent. `check_workload` finds every problem and names it
`file:line: reason`; `load_workload` refuses a workload with any error before a single request is sent, so
a bad workload is never replayed half-way. `DrawWriter` appends one flushed line per request (the recorder
and the generator write through it) and keeps a running sha256 so the manifest can be rewritten cheaply.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import Field, field_validator

from frank import readfile, tomlfile
from frank.errors import FrankError
from frank.paths import private_dir, write_private
from frank.tomlfile import Problem

CheckError = Problem  # one problem of a checked file, at its line (fidelity sets read it from here)

M = TypeVar("M", bound="Manifest")
FORMAT = "frank-workload"
FORMAT_VERSION = 1
MANIFEST = "workload.toml"
REQUIRED_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str,
    "task": str,
    "episode": str,
    "turn": int,
    "offset_s": (int, float),
    "body": dict,
}
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class DrawFile:
    name: str
    file: str
    sha256: str
    requests: int | None = None


@dataclass(frozen=True)
class WorkloadRequest:
    id: str
    task: str
    episode: str
    turn: int
    offset_s: float
    body: Mapping[str, Any]
    draw: str
    line: int


@dataclass(frozen=True)
class Workload:
    """A workload's manifest. `requests` holds the parsed draws that `load_workload` checked."""

    path: Path
    name: str
    description: str
    format_version: int
    draws: tuple[DrawFile, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)
    requests: Mapping[str, tuple[WorkloadRequest, ...]] = field(default_factory=dict, repr=False)

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def draw(self, name: str) -> DrawFile:
        for d in self.draws:
            if d.name == name:
                return d
        raise FrankError(f"{self.manifest_path}: no draw named {name!r} (draws: {', '.join(self.draw_names)})")

    @property
    def draw_names(self) -> list[str]:
        return [d.name for d in self.draws]

    @property
    def total_requests(self) -> int | None:
        counts = [d.requests for d in self.draws]
        return None if None in counts else sum(c for c in counts if c is not None)


# ---------------------------------------------------------------------------------------------- checking


class Manifest(tomlfile.Strict):
    """The head every checked manifest shares (a workload, a fidelity set, a task suite): its format, the
    format's version, its name. A subclass names its FORMAT; frank.tomlfile gives each refusal its line."""

    FORMAT: ClassVar[str] = FORMAT
    FORMAT_VERSION: ClassVar[int] = FORMAT_VERSION
    format: str
    format_version: int
    name: str
    description: str = ""

    @field_validator("format")
    @classmethod
    def _format(cls, value: str) -> str:
        if value != cls.FORMAT:
            raise ValueError(f"expected {cls.FORMAT!r}, got {value!r}")
        return value

    @field_validator("format_version")
    @classmethod
    def _format_version(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"must be 1 or more, got {value}")
        if value > cls.FORMAT_VERSION:
            raise ValueError(f"{value} is newer than this frank reads ({cls.FORMAT_VERSION})")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return name_field(value)


def name_field(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(f"expected a name of letters, digits, '.', '_' or '-', got {value!r}")
    return value


def file_field(value: str) -> str:
    """A file named by a manifest: relative, inside its folder."""
    if not value or Path(value).is_absolute() or ".." in Path(value).parts:
        raise ValueError(f"expected a relative file name inside the folder, got {value!r}")
    return value


def sha256_field(value: str) -> str:
    if not _SHA256.match(value):
        raise ValueError(f"expected 64 lowercase hex digits, got {value!r}")
    return value


class _DrawEntry(tomlfile.Strict):
    name: str
    file: str
    sha256: str
    requests: int | None = Field(None, ge=0)

    _name = field_validator("name")(name_field)
    _file = field_validator("file")(file_field)
    _sha256 = field_validator("sha256")(sha256_field)


class _WorkloadManifest(Manifest):
    meta: dict[str, Any] = Field(default_factory=dict)
    draws: list[_DrawEntry] = Field(min_length=1)

    @field_validator("draws")
    @classmethod
    def _unique(cls, draws: list[_DrawEntry]) -> list[_DrawEntry]:
        names = [d.name for d in draws]
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice is not None:
            raise ValueError(f"duplicate draw name {twice!r}")
        return draws


def check_manifest(model: type[M], path: Path, **context: Any) -> tuple[M | None, list[CheckError]]:
    """A TOML manifest's schema (validated with `context`), or None and every problem at its line (the
    parse error's, if any)."""
    text, data, bad = read_toml(path)
    if data is None:
        return None, bad
    lines = tomlfile.KeyLines(text)
    bad = tomlfile.plain_problems(data, path, lines)
    return (None, bad) if bad else tomlfile.refusals(model, data, path, lines, **context)


def _type_name(value: Any) -> str:
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        int: "integer",
        float: "number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _is(value: Any, kind: type | tuple[type, ...]) -> bool:
    if isinstance(value, bool):  # JSON true/false must not pass as numbers
        return kind is bool or (isinstance(kind, tuple) and bool in kind)
    return isinstance(value, kind)


def _message_errors(i: int, msg: Any) -> Iterator[str]:
    where = f"body.messages[{i}]"
    if not isinstance(msg, dict):
        yield f"{where}: expected an object, got {_type_name(msg)}"
        return
    role = msg.get("role")
    if not isinstance(role, str):
        yield f"{where}: missing field 'role'" if role is None else f"{where}.role: expected a string"
        return
    if role not in ROLES:
        yield f"{where}.role: unknown role {role!r}"
    content = msg.get("content")
    if content is not None and not isinstance(content, (str, list)):
        yield f"{where}.content: expected a string, an array of parts or null, got {_type_name(content)}"
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                yield f"{where}.content[{j}]: expected an object with a string 'type'"
    calls = msg.get("tool_calls")
    if calls is not None:
        if role != "assistant":
            yield f"{where}.tool_calls: only assistant messages carry tool calls"
        if not isinstance(calls, list):
            yield f"{where}.tool_calls: expected an array, got {_type_name(calls)}"
        else:
            for j, call in enumerate(calls):
                fn = call.get("function") if isinstance(call, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    yield f"{where}.tool_calls[{j}]: expected an object with function.name"
                elif not isinstance(fn.get("arguments", ""), str):
                    yield f"{where}.tool_calls[{j}].function.arguments: expected a JSON string"
    if content is None and role != "assistant":
        yield f"{where}: missing field 'content'"
    if role == "tool" and not isinstance(msg.get("tool_call_id"), str):
        yield f"{where}: a tool message needs a string 'tool_call_id'"


def body_errors(body: Any) -> list[str]:
    """What is wrong with one chat-completions request body (empty: nothing)."""
    if not isinstance(body, dict):
        return [f"body: expected an object, got {_type_name(body)}"]
    errors: list[str] = []
    messages = body.get("messages")
    if messages is None:
        errors.append("body: missing field 'messages'")
    elif not isinstance(messages, list):
        errors.append(f"body.messages: expected an array, got {_type_name(messages)}")
    elif not messages:
        errors.append("body.messages: empty")
    else:
        for i, msg in enumerate(messages):
            errors.extend(_message_errors(i, msg))
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            errors.append(f"body.tools: expected an array, got {_type_name(tools)}")
        else:
            for j, tool in enumerate(tools):
                fn = tool.get("function") if isinstance(tool, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    errors.append(f"body.tools[{j}]: expected an object with function.name")
    for key in ("max_tokens", "max_completion_tokens", "n"):
        if key in body and body[key] is not None and (not _is(body[key], int) or body[key] < 1):
            errors.append(f"body.{key}: expected a positive integer, got {body[key]!r}")
    for key in ("temperature", "top_p", "presence_penalty", "frequency_penalty"):
        if key in body and body[key] is not None and not _is(body[key], (int, float)):
            errors.append(f"body.{key}: expected a number, got {_type_name(body[key])}")
    if "stream" in body and not _is(body["stream"], bool) and body["stream"] is not None:
        errors.append(f"body.stream: expected a boolean, got {_type_name(body['stream'])}")
    if "model" in body and not isinstance(body["model"], str):
        errors.append(f"body.model: expected a string, got {_type_name(body['model'])}")
    return errors


def record_errors(record: Any) -> list[str]:
    """What is wrong with one parsed line of a draw file."""
    if not isinstance(record, dict):
        return [f"expected a JSON object, got {_type_name(record)}"]
    errors: list[str] = []
    for key, kind in REQUIRED_FIELDS.items():
        if key not in record:
            errors.append(f"missing field '{key}'")
        elif not _is(record[key], kind):
            errors.append(
                f"field '{key}': expected {_type_name(kind() if isinstance(kind, type) else 0.0)}, "
                f"got {_type_name(record[key])}"
            )
    if isinstance(record.get("id"), str) and not record["id"]:
        errors.append("field 'id': empty")
    if _is(record.get("turn"), int) and record["turn"] < 1:
        errors.append(f"field 'turn': must be 1 or more, got {record['turn']}")
    if _is(record.get("offset_s"), (int, float)) and not record["offset_s"] >= 0:
        errors.append(f"field 'offset_s': must be 0 or more, got {record['offset_s']}")
    if isinstance(record.get("body"), dict):
        errors.extend(body_errors(record["body"]))
    return errors


def read_checked(path: Path, kind: readfile.Kind, errors: list[CheckError]) -> bytes | None:
    """The file's bytes through the bounded reader (frank.readfile), or None with its refusal appended."""
    try:
        return readfile.read_bytes(path, kind)
    except readfile.ReadError as exc:
        errors.append(CheckError(path, exc.line, exc.reason))
        return None


def read_toml(path: Path) -> tuple[str, dict[str, Any] | None, list[CheckError]]:
    """A TOML manifest's text and data, or the refusal of the bounded reader or the parse error, at its line
    (also the episode suite format's)."""
    try:
        text = readfile.read_text(path, readfile.TOML)
    except readfile.ReadError as exc:
        return "", None, [CheckError(path, exc.line, exc.reason)]
    try:
        return text, tomllib.loads(text), []
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        return text, None, [CheckError(path, int(m.group(1)) if m else 1, f"bad TOML: {exc}")]


def _read_manifest(path: Path) -> tuple[Workload | None, list[CheckError]]:
    mpath = path / MANIFEST
    if not path.is_dir():
        return None, [CheckError(path, 0, "not a workload folder (no such directory)")]
    if not mpath.exists():
        return None, [CheckError(mpath, 0, "missing manifest (every workload folder has a workload.toml)")]
    manifest, errors = check_manifest(_WorkloadManifest, mpath)
    if manifest is None:
        return None, errors
    draws = tuple(DrawFile(d.name, d.file, d.sha256, d.requests) for d in manifest.draws)
    return Workload(path, manifest.name, manifest.description, manifest.format_version, draws, manifest.meta), []


def jsonl_lines(data: bytes) -> list[bytes]:
    """A JSON Lines file's lines; the final newline ends the last line."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def iter_jsonl(fpath: Path, lines: list[bytes], errors: list[CheckError]) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each line; a blank line or bad JSON is appended to `errors` as
    file:line: reason, in line order with whatever the caller appends, and skipped."""
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            errors.append(CheckError(fpath, n, "blank line"))
            continue
        try:
            value = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            errors.append(CheckError(fpath, n, line_problem(exc)))
            continue
        yield n, value


def line_problem(exc: ValueError) -> str:
    """Why one line of a JSON Lines file is not JSON: bad UTF-8 at its byte, or the JSON error."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text: byte {exc.start + 1} of the line is 0x{exc.object[exc.start]:02x} ({exc.reason})"
    return f"bad JSON: {exc}"


def _check_draw(
    workload: Workload, draw: DrawFile, seen_ids: dict[str, str], keep: bool
) -> tuple[list[CheckError], list[WorkloadRequest]]:
    mpath = workload.manifest_path
    keys = tomlfile.KeyLines(read_toml(mpath)[0])
    index = workload.draws.index(draw)
    fpath = workload.path / draw.file
    if not fpath.exists():
        return [
            CheckError(mpath, keys.line(("draws", index, "file")), f"draw {draw.name!r}: file {draw.file} is missing")
        ], []
    errors: list[CheckError] = []
    data = read_checked(fpath, readfile.JSONL, errors)
    if data is None:
        return errors, []
    digest = hashlib.sha256(data).hexdigest()
    if digest != draw.sha256:
        errors.append(
            CheckError(
                mpath,
                keys.line(("draws", index, "sha256")),
                f"draw {draw.name!r}: sha256 mismatch: {draw.file} has {digest}, the manifest says {draw.sha256}",
            )
        )
    requests: list[WorkloadRequest] = []
    rows = jsonl_lines(data)
    count = len(rows)
    for n, record in iter_jsonl(fpath, rows, errors):
        problems = record_errors(record)
        errors.extend(CheckError(fpath, n, p) for p in problems)
        if problems:
            continue
        where = f"{draw.file}:{n}"
        if record["id"] in seen_ids:
            errors.append(CheckError(fpath, n, f"duplicate id {record['id']!r} (first at {seen_ids[record['id']]})"))
            continue
        seen_ids[record["id"]] = where
        if keep:
            requests.append(
                WorkloadRequest(
                    record["id"],
                    record["task"],
                    record["episode"],
                    record["turn"],
                    float(record["offset_s"]),
                    record["body"],
                    draw.name,
                    n,
                )
            )
    if draw.requests is not None and draw.requests != count:
        errors.append(
            CheckError(
                mpath,
                keys.line(("draws", index, "requests")),
                f"draw {draw.name!r}: manifest says {draw.requests} requests, {draw.file} has {count} lines",
            )
        )
    return errors, requests


def check_workload(
    path: Path | str, draws: Iterable[str] | None = None, keep: bool = False
) -> tuple[Workload | None, list[CheckError]]:
    """Check the manifest and the named draws (all by default). Returns the workload (with the parsed
    requests when `keep`) and every error found; errors are not raised."""
    path = Path(path).expanduser()
    workload, errors = _read_manifest(path)
    if workload is None:
        return None, errors
    wanted = list(draws) if draws is not None else workload.draw_names
    unknown = [d for d in wanted if d not in workload.draw_names]
    if unknown:
        errors.append(
            CheckError(
                workload.manifest_path,
                1,
                f"no draw named {', '.join(map(repr, unknown))} (draws: {', '.join(workload.draw_names)})",
            )
        )
    seen: dict[str, str] = {}
    parsed: dict[str, tuple[WorkloadRequest, ...]] = {}
    for draw in workload.draws:
        if draw.name not in wanted:
            continue
        errs, reqs = _check_draw(workload, draw, seen, keep)
        errors.extend(errs)
        parsed[draw.name] = tuple(reqs)
    if keep:
        workload = Workload(
            workload.path,
            workload.name,
            workload.description,
            workload.format_version,
            workload.draws,
            workload.meta,
            parsed,
        )
    return workload, errors


def format_errors(errors: list[CheckError], limit: int | None = None) -> str:
    shown = errors if limit is None else errors[:limit]
    text = "\n".join(str(e) for e in shown)
    if limit is not None and len(errors) > limit:
        text += f"\n... and {len(errors) - limit} more (run `frank workload check` for all)"
    return text


def read_manifest(path: Path | str) -> Workload:
    """The manifest alone (cheap, for listings). Raises FrankError naming every manifest error."""
    workload, errors = _read_manifest(Path(path).expanduser())
    if workload is None:
        raise FrankError("bad workload:\n" + format_errors(errors))
    return workload


def load_workload(path: Path | str, draws: Iterable[str] | None = None) -> Workload:
    """Check and parse the workload (the named draws, or all). Any error anywhere raises FrankError with
    every error listed (up to 20), so nothing is replayed from a workload that is partly bad."""
    workload, errors = check_workload(path, draws, keep=True)
    if errors or workload is None:
        raise FrankError(
            f"workload {path} has {len(errors)} error(s); nothing was replayed:\n" + format_errors(errors, 20)
        )
    return workload


# ----------------------------------------------------------------------------------------------- writing


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string with ASCII escapes is a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def manifest_text(name: str, description: str, draws: Iterable[DrawFile], meta: Mapping[str, Any] | None = None) -> str:
    out = [
        f"format = {_toml_value(FORMAT)}",
        f"format_version = {FORMAT_VERSION}",
        f"name = {_toml_value(name)}",
        f"description = {_toml_value(description)}",
        "",
    ]
    for d in draws:
        out += [
            "[[draws]]",
            f"name = {_toml_value(d.name)}",
            f"file = {_toml_value(d.file)}",
            f"sha256 = {_toml_value(d.sha256)}",
        ]
        if d.requests is not None:
            out.append(f"requests = {d.requests}")
        out.append("")
    if meta:
        out.append("[meta]")
        out += [f"{k} = {_toml_value(v)}" for k, v in meta.items() if v is not None]
        out.append("")
    return "\n".join(out)


def write_manifest(
    path: Path, name: str, description: str, draws: Iterable[DrawFile], meta: Mapping[str, Any] | None = None
) -> Path:
    target = path / MANIFEST
    write_private(target, manifest_text(name, description, draws, meta))
    return target


def encode_record(record: Mapping[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


class DrawWriter:
    """Appends one request per line, flushed per line, with a running sha256 and count. Opening an existing
    file continues it (its bytes are hashed first)."""

    def __init__(self, path: Path, name: str) -> None:
        self.path, self.name = path, name
        self.sha = hashlib.sha256()
        self.count = 0
        if path.exists():
            data = readfile.read_bytes(path, readfile.JSONL)
            if data and not data.endswith(b"\n"):  # a torn last line: end it so the next record stays whole
                data += b"\n"
                with open(path, "ab") as fh:
                    fh.write(b"\n")
            self.sha.update(data)
            self.count = data.count(b"\n")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._fh = os.fdopen(fd, "ab")

    def write(self, record: Mapping[str, Any]) -> None:
        data = encode_record(record)
        self._fh.write(data)
        self._fh.flush()
        self.sha.update(data)
        self.count += 1

    def draw_file(self) -> DrawFile:
        return DrawFile(self.name, self.path.name, self.sha.hexdigest(), self.count)

    def close(self) -> None:
        self._fh.close()


def write_workload(
    path: Path | str,
    name: str,
    description: str,
    draws: Iterable[tuple[str, Iterable[Mapping[str, Any]]]],
    meta: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write a whole workload: draws are (name, records). Refuses to overwrite an existing workload unless
    asked; draw files are written first and the manifest last, so a half-written folder fails `check`."""
    path = Path(path).expanduser()
    if (path / MANIFEST).exists() and not overwrite:
        raise FrankError(f"{path / MANIFEST} exists: choose another --out or remove it")
    private_dir(path)
    (path / MANIFEST).unlink(missing_ok=True)
    files: list[DrawFile] = []
    for dname, records in draws:
        fpath = path / f"{dname}.jsonl"
        fpath.unlink(missing_ok=True)
        writer = DrawWriter(fpath, dname)
        try:
            for record in records:
                writer.write(record)
        finally:
            writer.close()
        files.append(writer.draw_file())
    write_manifest(path, name, description, files, meta)
    return path


# ---------------------------------------------------------------------------------------------- importing


def _unwrap(obj: Any) -> tuple[Any, float | None]:
    """The request body inside one imported line, and its time if the line has one. Accepts a bare body,
    an OpenAI batch line ({"custom_id", "url", "body"}), a proxy log line ({"request": body}) and this
    format's own lines ({"body": ..., "offset_s": ...})."""
    if isinstance(obj, dict) and "messages" not in obj:
        for key in ("body", "request", "request_body"):
            if isinstance(obj.get(key), dict):
                inner = obj[key]
                for tkey in ("offset_s", "timestamp", "time", "created", "ts"):
                    if _is(obj.get(tkey), (int, float)):
                        return inner, float(obj[tkey])
                return inner, None
    return obj, None


def _extends(prefix: list[Any], messages: list[Any]) -> bool:
    return len(prefix) < len(messages) and messages[: len(prefix)] == prefix


def import_jsonl(
    sources: list[Path | str], out: Path | str, name: str | None = None, description: str = "", overwrite: bool = False
) -> Path:
    """Turn plain JSONL files of chat-completions request bodies into a workload: one draw per file.
    Requests whose messages extend an earlier request's messages continue its episode (turn + 1); others
    start a new one. Episodes with the same opening messages share a task. Every bad line is reported as
    `file:line: reason` and nothing is written."""
    paths = [Path(s).expanduser() for s in sources]
    errors: list[CheckError] = []
    draws: list[tuple[str, list[dict[str, Any]]]] = []
    used: set[str] = set()
    for k, src in enumerate(paths, 1):
        dname = re.sub(r"[^A-Za-z0-9._-]+", "-", src.stem).strip("-.") or f"draw-{k}"
        while dname in used:
            dname = f"{dname}-{k}"
        used.add(dname)
        episodes: list[tuple[str, list[Any], int]] = []  # (episode id, last messages, last turn)
        tasks: dict[str, str] = {}
        records: list[dict[str, Any]] = []
        t0: float | None = None
        whole = read_checked(src, readfile.JSONL, errors)
        if whole is None:
            continue
        for n, raw in enumerate(jsonl_lines(whole), 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                errors.append(CheckError(src, n, line_problem(exc)))
                continue
            body, when = _unwrap(obj)
            problems = body_errors(body)
            if problems:
                errors.extend(CheckError(src, n, p) for p in problems)
                continue
            messages = body["messages"]
            match = next((i for i in range(len(episodes) - 1, -1, -1) if _extends(episodes[i][1], messages)), None)
            if match is None:
                opening = json.dumps(messages[:2], sort_keys=True)
                task = tasks.setdefault(opening, f"task-{len(tasks) + 1}")
                episodes.append((f"{dname}-ep{len(episodes) + 1}", messages, 1))
                match, turn = len(episodes) - 1, 1
            else:
                ep_id, _, last = episodes[match]
                turn = last + 1
                episodes[match] = (ep_id, messages, turn)
                task = next(r["task"] for r in records if r["episode"] == ep_id)
            if when is not None and t0 is None:
                t0 = when
            records.append(
                {
                    "id": f"{dname}-{len(records) + 1:05d}",
                    "task": task,
                    "episode": episodes[match][0],
                    "turn": turn,
                    "offset_s": round(max(0.0, when - t0), 3) if when is not None and t0 is not None else 0.0,
                    "body": body,
                }
            )
        if not records and not any(e.path == src for e in errors):
            errors.append(CheckError(src, 1, "no requests in the file"))
        draws.append((dname, records))
    if errors:
        raise FrankError(f"nothing imported: {len(errors)} error(s):\n" + format_errors(errors, 50))
    wname = name or Path(out).name
    desc = description or f"Imported from {', '.join(p.name for p in paths)}"
    return write_workload(
        out, wname, desc, draws, {"source": "import", "files": [str(p) for p in paths]}, overwrite=overwrite
    )
