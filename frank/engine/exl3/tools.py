"""Tool calls out of the model's text, in the format its chat template teaches (as vLLM's parsers of the
same names read them): `deepseek_v3` (frank's tiny tokenizer's template, frank.engine.models.tiny_model) and
`hermes` (SmolLM2's, frank/engine/models/smollm2_tools.jinja). A call whose arguments are not a JSON object
leaves the whole answer as text: nothing is guessed at."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from typing import Any

Call = tuple[str, dict[str, Any]]  # (function name, arguments)

_DEEPSEEK_CALL = re.compile(
    r"<｜tool▁call▁begin｜>(?:function)?<｜tool▁sep｜>([^\n]+)\n```json\n(.*?)\n```<｜tool▁call▁end｜>", re.S
)
_HERMES_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)


def _object(raw: str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _deepseek_calls(text: str) -> list[Call] | None:
    calls = []
    for name, raw in _DEEPSEEK_CALL.findall(text):
        arguments = _object(raw)
        if arguments is None:
            return None
        calls.append((name.strip(), arguments))
    return calls


def _hermes_calls(text: str) -> list[Call] | None:
    calls = []
    for raw in _HERMES_CALL.findall(text):
        body = _object(raw)
        if body is None or not isinstance(body.get("name"), str) or not isinstance(body.get("arguments"), dict):
            return None
        calls.append((body["name"], body["arguments"]))
    return calls


# parser name -> (where the calls begin: streaming holds the text back from there, the calls' reader)
FORMATS: dict[str, tuple[str, Callable[[str], list[Call] | None]]] = {
    "deepseek_v3": ("<｜tool▁calls▁begin｜>", _deepseek_calls),
    "hermes": ("<tool_call>", _hermes_calls),
}


def call_start(parser: str) -> str:
    return FORMATS[parser][0]


def split_tool_calls(parser: str, text: str) -> tuple[str, list[dict[str, Any]]]:
    """(content, OpenAI tool_calls) of a finished answer; (text, []) when it holds no well-formed call."""
    start, read = FORMATS[parser]
    at = text.find(start)
    calls = read(text[at:]) if at >= 0 else None
    if not calls:
        return text, []
    return text[:at], [
        {
            "id": f"call_{secrets.token_hex(8)}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
        }
        for name, arguments in calls
    ]
