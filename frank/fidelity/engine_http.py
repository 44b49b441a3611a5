"""One POST to an engine for a fidelity measure, with the errors every caller gives: the engine did not
answer, or answered with another status than 200 (its text, cut)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from frank.errors import FrankError


def post_json(
    client: httpx.Client,
    base_url: str,
    path: str,
    body: dict[str, Any],
    who: str = "the engine",
    hint: Callable[[str], str] | None = None,
) -> Any:
    """POST `body` to `base_url + path`; the answer's JSON. `who` names the answerer in the error; `hint`
    turns an error's text into a hint appended after the status."""
    try:
        response = client.post(f"{base_url}{path}", json=body)
    except httpx.HTTPError as exc:
        raise FrankError(f"fidelity: the engine at {base_url} did not answer: {exc}") from None
    if response.status_code != 200:
        detail = response.text[:400]
        raise FrankError(f"fidelity: {who} answered {response.status_code}{hint(detail) if hint else ''}: {detail}")
    return response.json()
