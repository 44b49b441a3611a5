"""The edge of every hand-edited TOML file frank reads (profiles, designs, suites, campaign files, the
console's config).

- `parse` turns the text into data or refuses it at the line the TOML error names.
- `KeyLines` finds the line of any field (`knobs.threads.values[0]`, `parts[1].evidence[0].state`) by
  scanning the text: tomllib gives no positions, so a field's line is the line of its key, or of the
  nearest enclosing key or table header it can find (a value inside an inline table or a multi-line array
  is reported at its key's line).
- `check_plain` refuses the values TOML allows and no field of frank wants: dates and times, NaN and
  infinities, integers beyond a float's exact range (2^53), strings with control characters other than
  tab and newline, nesting deeper than `MAX_DEPTH`.
- `validate` runs a pydantic model (strict: no coercion, no unknown field) and turns its first refusal
  into the format's own error naming the file, the line and the field; `refusals` gives every one.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from frank import readfile
from frank.errors import FrankError
from frank.readfile import field_name as field_name  # one home for the name of a field, TOML or JSON

SAFE_INT = 2**53  # integers a float holds exactly: every count, bound and knob value of frank fits
MAX_DEPTH = 8  # tables and arrays inside each other; frank's formats nest four deep at most
MAX_STRING = 1 << 20  # characters of one string value
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

Path_ = tuple[str | int, ...]
Err = Callable[[str], FrankError]
M = TypeVar("M", bound=BaseModel)


class Strict(BaseModel):
    """A table of a file format: strict types, no unknown field, no NaN or infinity."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)


def split_field(name: str) -> Path_:
    """'parts[1].evidence[0].state' -> ('parts', 1, 'evidence', 0, 'state') (quoted keys kept whole)."""
    out: list[str | int] = []
    for token in re.finditer(r'"([^"]*)"|\[(\d+)\]|([^.\["]+)', name):
        quoted, index, bare = token.groups()
        out.append(int(index) if index is not None else (quoted if quoted is not None else bare))
    return tuple(out)


def _split_key(text: str) -> list[str]:
    """A dotted TOML key (`a."b.c".d`) into its parts."""
    parts = re.findall(r'\s*(?:"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([A-Za-z0-9_-]+))\s*(?:\.|$)', text)
    return [q or s or b for q, s, b in parts]


class KeyLines:
    """Line numbers of the keys and table headers of a TOML text, by field path."""

    def __init__(self, text: str) -> None:
        self.lines: dict[Path_, int] = {}
        arrays: dict[Path_, int] = {}
        table: Path_ = ()
        in_string = ""
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if in_string:
                if line.count(in_string) % 2 == 1:
                    in_string = ""
                continue
            header = re.match(r"^(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$", line)
            if header:
                keys = _split_key(header.group(2))
                concrete: Path_ = ()
                for k, key in enumerate(keys):
                    concrete = (*concrete, key)
                    last = k == len(keys) - 1
                    if last and header.group(1) == "[[":
                        arrays[concrete] = arrays.get(concrete, -1) + 1
                        concrete = (*concrete, arrays[concrete])
                    elif concrete in arrays:
                        concrete = (*concrete, arrays[concrete])
                    self.lines.setdefault(concrete, number)
                table = concrete
                continue
            pair = re.match(r'^((?:"[^"]*"|\'[^\']*\'|[A-Za-z0-9_.\- ]+?))\s*=(.*)$', line)
            if pair and not line.startswith("#"):
                self.lines.setdefault((*table, *_split_key(pair.group(1))), number)
                rest = pair.group(2)
                for quote in ('"""', "'''"):
                    if rest.count(quote) % 2 == 1:
                        in_string = quote

    def line(self, path: Path_ | str) -> int:
        """The line of the field, else of its nearest enclosing key or table; 0 when none is found."""
        path = split_field(path) if isinstance(path, str) else path
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return 0


def where(source: str | Path, line: int) -> str:
    return f"{source}:{line}" if line else str(source)


def refusal(error: Err, source: str | Path, lines: KeyLines | None, path: Path_ | str, message: str) -> FrankError:
    """The format's error: `FILE:LINE: FIELD: message`."""
    name = path if isinstance(path, str) else field_name(path)
    line = lines.line(path) if lines is not None else 0
    return error(f"{where(source, line)}: {name}: {message}" if name else f"{where(source, line)}: {message}")


def parse(text: str, source: str | Path, error: Err) -> dict[str, Any]:
    """The TOML data, or the format's error at the line TOML names."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+)", str(exc))
        line = int(found.group(1)) if found else max(1, len(text.splitlines()))
        raise error(f"{source}:{line}: invalid TOML: {exc}") from None


def read_text(path: Path | str, error: Err) -> str:
    """A hand-edited TOML file's text, through the bounded reader (frank.readfile: a regular file of at most
    4 MiB, UTF-8, each refusal naming the path, and the line and byte of bad UTF-8)."""
    return readfile.read_text(path, readfile.TOML, error)


def toml_value(value: Any) -> str:
    """A plain value (a string, an integer, a float, a boolean) as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))  # a JSON string is a TOML basic string


def _value_end(rest: str) -> int:
    """Where the value of `rest` (the text after `=`) ends: at a `#` outside quotes, or the line's end."""
    quote = ""
    for i, char in enumerate(rest):
        if quote:
            if char == "\\" and quote == '"':
                continue
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#":
            return i
    return len(rest)


def with_values(text: str, values: dict[Path_, Any], source: str | Path, error: Err) -> str:
    """`text` with each field's value replaced where it is written, as `key = value` on a line of its own;
    every other byte (comments, order, spacing) as it was. So frank changes a hand-edited file in place, never
    rewriting it. A field written any other way is refused, and so is an edit that would not read back."""
    lines = text.splitlines(keepends=True)
    keys = KeyLines(text)
    for path, value in values.items():
        n = keys.lines.get(path, 0)
        line = lines[n - 1] if n else ""
        key = re.match(r"^(\s*[^=#\[]+?=\s*)", line)
        if not key or _split_key(key.group(1).rstrip().rstrip("=").strip())[-1:] != [path[-1]]:
            raise error(f"{where(source, n)}: {field_name(path)}: not written as `key = value` on a line of its own")
        rest = line[key.end() :]
        end = _value_end(rest)
        value_text = rest[:end].rstrip()
        lines[n - 1] = key.group(1) + toml_value(value) + rest[len(value_text) :]
    out = "".join(lines)
    data, expected = tomllib.loads(out), tomllib.loads(text)
    for path, value in values.items():
        _put(expected, path, value)
    if data != expected:
        raise error(f"{source}: the edit in place would not read back as asked; change it by hand")
    return out


def _put(data: Any, path: Path_, value: Any) -> None:
    for part in path[:-1]:
        data = data[part]
    data[path[-1]] = value


def plain_problem(value: Any) -> str | None:
    """Why a scalar is not a plain value frank takes (None: it is)."""
    if isinstance(value, (datetime, date, time)):
        return f"a TOML date or time ({value.isoformat()}) is not a value frank reads here; quote it as a string"
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) > SAFE_INT:
        return f"the integer {value} is beyond what frank reads exactly (at most 2^53 = {SAFE_INT})"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} is not a finite number"
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            return f"a string of {len(value)} characters (at most {MAX_STRING})"
        bad = _CONTROL.search(value)
        if bad:
            return f"holds the control character {bad.group()!r} (only tab and newline are taken)"
    return None


def check_plain(data: Any, source: str | Path, lines: KeyLines | None, error: Err) -> None:
    """Refuse the first value no field of frank takes (see the module docstring), naming its field."""
    problems = plain_problems(data, source, lines)
    if problems:
        raise error(f"{where(problems[0].path, problems[0].line)}: {problems[0].reason}")


def plain_problems(data: Any, source: str | Path, lines: KeyLines | None, path: Path_ = ()) -> list[Problem]:
    """Every value no field of frank takes, each at its line with its field."""

    def problem(at: Path_, message: str) -> list[Problem]:
        name = field_name(at)
        return [Problem(source, lines.line(at) if lines is not None else 0, f"{name}: {message}" if name else message)]

    if len(path) > MAX_DEPTH * 2:
        return problem(path, f"nested deeper than {MAX_DEPTH} tables or arrays")
    out: list[Problem] = []
    if isinstance(data, dict):
        for key, value in data.items():
            bad = plain_problem(key)
            out += problem(path, f"a key {bad}") if bad else plain_problems(value, source, lines, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out += plain_problems(value, source, lines, (*path, i))
    else:
        bad = plain_problem(data)
        if bad:
            out += problem(path, bad)
    return out


_EXPECTED = {
    "string_type": "expected a string",
    "int_type": "expected an integer",
    "float_type": "expected a number",
    "bool_type": "expected true or false",
    "dict_type": "expected a table",
    "model_type": "expected a table",
    "model_attributes_type": "expected a table",
    "list_type": "expected an array",
    "tuple_type": "expected an array",
}


def _message(err: dict[str, Any]) -> str:
    kind, value = err["type"], err.get("input")
    if kind == "missing":
        return "missing required field"
    if kind == "value_error":  # a validator's own sentence
        return str(err["msg"]).removeprefix("Value error, ")
    ctx = err.get("ctx") or {}
    bounds = {
        "too_short": "must list at least {min_length} value(s)",
        "too_long": "must list at most {max_length} values",
        "string_too_short": "must not be empty",
        "string_too_long": "must be at most {max_length} characters",
        "greater_than_equal": "must be at least {ge}",
        "greater_than": "must be more than {gt}",
        "less_than_equal": "must be at most {le}",
        "less_than": "must be less than {lt}",
    }
    if kind in bounds:
        return f"{bounds[kind].format(**ctx)}, got {_shown(value)}"
    msg = _EXPECTED.get(kind) or str(err["msg"])
    return f"{msg[0].lower()}{msg[1:]}, got {_shown(value)}"


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


@dataclass(frozen=True)
class Problem:
    """One problem of a checked file: where (line 0: the file as a whole) and why (`field: reason`)."""

    path: Path | str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"  # a checker's lines: always FILE:LINE (0: the whole file)


def validate(model: type[M], data: Any, source: str | Path, lines: KeyLines | None, error: Err, **context: Any) -> M:
    """The model of `data`, or the format's error naming the file, line and field of the first refusal."""
    found, problems = refusals(model, data, source, lines, **context)
    if found is None:
        first = problems[0]
        raise error(f"{where(first.path, first.line)}: {first.reason}")
    return found


def refusals(
    model: type[M], data: Any, source: str | Path, lines: KeyLines | None, **context: Any
) -> tuple[M | None, list[Problem]]:
    """The model of `data`, or None and every refusal, each at its line with its field: the one way to
    collect several problems of a file."""
    try:
        return model.model_validate(data, context=context or None), []
    except ValidationError as exc:
        out = []
        for err in exc.errors(include_url=False):
            path = tuple(p for p in err["loc"] if isinstance(p, (str, int)))
            if err["type"] == "extra_forbidden":
                known = getattr(_model_at(model, path[:-1]), "model_fields", {})
                message = f"unknown field (known: {', '.join(known)})"
            else:
                message = _message(dict(err))
            name = field_name(path)
            line = lines.line(path) if lines is not None else 0
            out.append(Problem(source, line, f"{name}: {message}" if name else message))
        return None, out


def _model_at(model: type[BaseModel], path: Path_) -> Any:
    """The model class of the table at `path` (for the known fields of an unknown-field refusal)."""
    current: Any = model
    key_next = False  # the part after a dict field is a key of it, not a field name
    for part in path:
        if isinstance(part, int):
            continue
        if key_next:
            key_next = False
            continue
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return None
        current, key_next = _unwrap(fields[part].annotation)
    return current


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(the model inside an Optional/list/dict annotation, whether a dict's keys come next)."""
    import typing

    is_dict = False
    while typing.get_origin(annotation) is not None:
        is_dict = is_dict or typing.get_origin(annotation) is dict
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if not args:
            break
        annotation = args[-1]
    return annotation, is_dict


def contained(root: Path, ref: str) -> Path | None:
    """`ref` (relative to `root`) resolved, symlinks followed, when it stays inside `root`; None when it is
    absolute or leaves it (`..`, a link out)."""
    if not ref or Path(ref).is_absolute() or ref.startswith("~"):
        return None
    base = root.resolve()
    path = (base / ref).resolve()
    return path if path == base or path.is_relative_to(base) else None
