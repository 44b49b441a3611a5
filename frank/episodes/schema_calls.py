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


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise RefusedAnswer(f"the answer repeats the key {dup[0]!r}")
    return dict(pairs)


def _refuse_constant(name: str) -> Any:
    raise RefusedAnswer(f"the answer holds {name}, which is not JSON")


def read_answer(text: str, tools: list[ToolSpec], *, cut_off: bool = False) -> tuple[str, dict[str, Any]]:
    """(tool name, arguments) of a valid answer; RefusedAnswer otherwise. `cut_off`: the engine stopped
    at max_tokens (then an unparsable answer is refused as cut off, not as malformed)."""
    from jsonschema import Draft7Validator

    try:
        answer = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        if cut_off:
            raise RefusedAnswer("the answer was cut off at max_tokens before its JSON ended") from None
        raise RefusedAnswer(f"the answer is not JSON ({exc.msg} at character {exc.pos})") from None
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
    errors = sorted(Draft7Validator(granted[name].parameters).iter_errors(arguments), key=lambda e: list(e.path))
    if errors:
        where = "/".join(str(p) for p in errors[0].path) or "arguments"
        raise RefusedAnswer(f"the arguments of {name} fail its schema at {where}: {errors[0].message}")
    return name, arguments
