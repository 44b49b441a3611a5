"""Constrained tool calls: the answer schema built from a task's tools, and the one judge of an answer.

A model too small to write a tool call when merely offered tools (SmolLM2-135M answers in prose) still
writes one when the engine constrains its answer with a JSON schema (structured output: `response_format`,
which vLLM and llama.cpp both enforce while decoding). Each turn the answer must be one object

    {"tool": NAME, "arguments": {...}}

where NAME is one of the task's tools, with arguments that meet that tool's own parameter schema, or
`submit` with {"answer": "..."} to end the episode. `read_answer` turns the text back into a call or
refuses it with the reason: the engine's constraint is trusted for nothing, so an answer that is cut off,
is not JSON, names a tool the task does not grant, or has arguments off the tool's schema never runs.

Imports: the standard library and jsonschema (the agent venv's, which inspect-ai itself validates tool
arguments with).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SUBMIT = "submit"
SUBMIT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "description": "What you found or did, in one line."}},
    "required": ["answer"],
    "additionalProperties": False,
}
ANSWER_KEYS = ("tool", "arguments")


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model is told of it: inspect's ToolInfo (name, description, parameter schema)."""

    name: str
    description: str
    parameters: dict[str, Any]


SUBMIT_SPEC = ToolSpec(SUBMIT, "End the episode when the task is done.", SUBMIT_PARAMETERS)


class RefusedAnswer(ValueError):
    """The answer is not a call of a granted tool with valid arguments; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _choice(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"tool": {"type": "string", "enum": [tool.name]}, "arguments": tool.parameters},
        "required": list(ANSWER_KEYS),
        "additionalProperties": False,
    }


def answer_schema(tools: list[ToolSpec]) -> dict[str, Any]:
    """One choice per granted tool, plus submit: what the engine constrains each answer to."""
    return {"anyOf": [_choice(t) for t in [*tools, SUBMIT_SPEC]]}


def tools_prompt(tools: list[ToolSpec]) -> str:
    """The tools and the answer's form, for the system message (the request carries no `tools`)."""
    lines = ["Each answer is one JSON object that calls one tool:", '{"tool": NAME, "arguments": {...}}', "Tools:"]
    for tool in [*tools, SUBMIT_SPEC]:
        lines.append(f"- {tool.name}: {tool.description.strip()}")
        lines.append(f"  arguments: {json.dumps(tool.parameters['properties'])}")
    return "\n".join(lines)


MAX_ANSWER_CHARS = 1 << 20  # far beyond max_tokens_per_turn of any suite; a longer answer is refused unread
MAX_DEPTH = 16  # objects and arrays inside each other; a tool's arguments nest two deep
MAX_INT_DIGITS = 19  # a 64-bit integer; Python's own limit (4,300 digits) raises instead of refusing
# Control characters a string of an answer may not hold: NUL ends a C string (an argv, a path), the rest
# hide text from the operator's terminal; tab, newline and carriage return are ordinary in code.
_CONTROL = frozenset(chr(c) for c in range(32) if chr(c) not in "\t\n\r") | {"\x7f"}
_PATH_KEYS = frozenset({"path", "file", "filename", "old_path", "new_path"})  # one line, no control at all


def _nesting_problem(text: str) -> str | None:
    """Why the answer nests too deep (one pass over the text, strings skipped), else None."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return f"the answer nests deeper than {MAX_DEPTH} objects or arrays"
        elif ch in "]}":
            depth -= 1
    return None


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):  # linear: a set of the keys seen, not a count per key
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RefusedAnswer(f"the answer repeats the key {key!r}")
            seen.add(key)
    return out


def _refuse_constant(name: str) -> Any:
    raise RefusedAnswer(f"the answer holds {name}, which is not JSON")


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise RefusedAnswer(f"the answer holds an integer of {len(text.lstrip('-'))} digits")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise RefusedAnswer(f"the answer holds {text}, beyond a double")
    return value


def _string_problem(value: str, key: str) -> str | None:
    bad = next((ch for ch in value if ch in _CONTROL or "\ud800" <= ch <= "\udfff"), None)
    if bad is not None:
        what = "a lone surrogate" if "\ud800" <= bad <= "\udfff" else "the control character"
        return f"{key or 'a string'} holds {what} {bad!r}"
    if key in _PATH_KEYS and ("\n" in value or "\r" in value or "\t" in value):
        return f"{key} holds a line break or tab (a path is one line)"
    return None


def _strings_problem(value: Any, key: str = "") -> str | None:
    """The first string (key or value) of the answer that no tool may be given, else None."""
    stack: list[tuple[Any, str]] = [(value, key)]
    while stack:
        item, name = stack.pop()
        if isinstance(item, str):
            problem = _string_problem(item, name)
            if problem:
                return problem
        elif isinstance(item, dict):
            for k, v in item.items():
                problem = _string_problem(k, "a key")
                if problem:
                    return problem
                stack.append((v, k))
        elif isinstance(item, list):
            stack.extend((v, name) for v in item)
    return None


def read_answer(text: str | None, tools: list[ToolSpec], *, cut_off: bool = False) -> tuple[str, dict[str, Any]]:
    """(tool name, arguments) of a valid answer; RefusedAnswer with the reason otherwise, never another
    exception: bounded in size (MAX_ANSWER_CHARS), depth (MAX_DEPTH) and integer length, linear in the
    answer's length. `cut_off`: the engine stopped at max_tokens (then an unparsable answer is refused as
    cut off, not as malformed)."""
    from jsonschema import Draft7Validator

    if not isinstance(text, str):
        raise RefusedAnswer(f"the answer is {'empty (null)' if text is None else type(text).__name__}, not text")
    if len(text) > MAX_ANSWER_CHARS:
        raise RefusedAnswer(f"the answer is {len(text)} characters long (at most {MAX_ANSWER_CHARS})")
    too_deep = _nesting_problem(text)
    if too_deep:
        raise RefusedAnswer(too_deep)
    try:
        answer = json.loads(
            text,
            object_pairs_hook=_no_duplicate_keys,
            parse_constant=_refuse_constant,
            parse_int=_int,
            parse_float=_float,
        )
    except json.JSONDecodeError as exc:
        if cut_off:
            raise RefusedAnswer("the answer was cut off at max_tokens before its JSON ended") from None
        raise RefusedAnswer(f"the answer is not JSON ({exc.msg} at character {exc.pos})") from None
    except RefusedAnswer:
        raise
    except (ValueError, RecursionError) as exc:  # a JSON number Python will not take, and so on
        raise RefusedAnswer(f"the answer is not JSON frank reads ({type(exc).__name__}: {str(exc)[:120]})") from None
    if not isinstance(answer, dict):
        raise RefusedAnswer(f"the answer is a JSON {type(answer).__name__}, not an object")
    if sorted(answer) != sorted(ANSWER_KEYS):
        raise RefusedAnswer(f"the answer's keys are {sorted(answer)}, expected exactly {list(ANSWER_KEYS)}")
    name, arguments = answer["tool"], answer["arguments"]
    granted = {t.name: t for t in [*tools, SUBMIT_SPEC]}
    if not isinstance(name, str) or name not in granted:
        raise RefusedAnswer(f"the tool {name!r} is not granted by this task (granted: {', '.join(granted)})")
    if not isinstance(arguments, dict):
        raise RefusedAnswer(f"the arguments of {name} are not an object")
    bad_string = _strings_problem(arguments)
    if bad_string:
        raise RefusedAnswer(f"the arguments of {name}: {bad_string}")
    errors = sorted(Draft7Validator(granted[name].parameters).iter_errors(arguments), key=lambda e: list(e.path))
    if errors:
        where = "/".join(str(p) for p in errors[0].path) or "arguments"
        raise RefusedAnswer(f"the arguments of {name} fail its schema at {where}: {errors[0].message}")
    return name, arguments
