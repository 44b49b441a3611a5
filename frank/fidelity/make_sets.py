"""Make the three shipped fidelity sets (frank/fidelity/sets/{code,agent,prose}), deterministically.

    python -m frank.fidelity.make_sets            rewrite the shipped sets
    python -m frank.fidelity.make_sets --check    exit 1 if regenerating would change a shipped byte

- code: Python, JSON, shell sessions and tracebacks from the tiny model's corpus generators
  (frank/engine/models/tiny_corpus.py).
- agent: transcripts of synthetic W01 conversations (frank/workloads/w01.py, mini, seed 1): the task, the assistant's
  tool calls and the tool results, as an agent's context carries them.
- prose: sentences and paragraphs from the corpus's prose generator.

Every generator is seeded with strings (stable across Python versions). SETS_VERSION is bumped whenever the
bytes change on purpose; a set's identity everywhere else is its sha256.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from frank.engine.models import tiny_corpus
from frank.fidelity.sets import SHIPPED_DIR, Document, write_set
from frank.workloads import w01

SETS_VERSION = 1
DOCUMENTS = 8
DOC_CHARS = 2400  # about 600-700 tiny-tokenizer tokens: every document fills max_tokens
MAX_TOKENS = 512


def _fill(rng: random.Random, parts: tuple, chars: int) -> str:
    out, size = [], 0
    while size < chars:
        piece = rng.choice(parts)(rng)
        out.append(piece)
        size += len(piece) + 2
    return "\n\n".join(out)[:chars]


def code_documents() -> Iterator[Document]:
    gens = (
        tiny_corpus.python_snippet,
        tiny_corpus.python_snippet,
        tiny_corpus.json_snippet,
        tiny_corpus.shell_session,
        tiny_corpus.traceback_text,
    )
    for i in range(1, DOCUMENTS + 1):
        yield Document(f"code-{i:02d}", _fill(random.Random(f"fidelity-sets:{SETS_VERSION}:code:{i}"), gens, DOC_CHARS))


def prose_documents() -> Iterator[Document]:
    for i in range(1, DOCUMENTS + 1):
        rng = random.Random(f"fidelity-sets:{SETS_VERSION}:prose:{i}")
        yield Document(f"prose-{i:02d}", _fill(rng, (tiny_corpus.prose,), DOC_CHARS))


def _transcript(body: dict[str, Any], chars: int) -> str:
    """A conversation as an agent's context reads it: the system message (the repository context, 98-99% of
    a W01 prompt) cut so that the whole fits `chars`, then the task, each tool call and its result."""
    turns = []
    for message in body["messages"][1:]:
        role, content = message["role"], message.get("content") or ""
        calls = "".join(
            f"\n<tool_call>{c['function']['name']}({c['function']['arguments']})</tool_call>"
            for c in message.get("tool_calls") or []
        )
        turns.append(f"[{role}]\n{content}{calls}")
    conversation = "\n\n".join(turns)[-(chars // 2) :]
    system = body["messages"][0]["content"][: max(0, chars - len(conversation) - 12)]
    return f"[system]\n{system}\n\n{conversation}"


def agent_documents() -> Iterator[Document]:
    """The last request of each conversation (it carries the whole conversation), draw 1 then draw 2."""
    count = 0
    for _draw, records in w01.generate("mini", seed=1):
        last: dict[str, dict[str, Any]] = {}
        for record in records:
            last[record["episode"]] = record
        for episode, record in last.items():
            yield Document(f"agent-{episode}", _transcript(record["body"], DOC_CHARS))
            count += 1
            if count == DOCUMENTS:
                return


GENERATORS = {
    "code": (code_documents, "Code: Python, JSON, shell sessions and tracebacks (tiny-corpus generators)"),
    "agent": (agent_documents, "Agent transcripts: synthetic W01 conversations (mini, seed 1), tool calls and results"),
    "prose": (prose_documents, "Prose: paragraphs of the tiny corpus's prose, with some non-ASCII words"),
}


def make(name: str, root: Path = SHIPPED_DIR) -> Path:
    documents, description = GENERATORS[name]
    meta = {
        "generator": "frank.fidelity.make_sets",
        "sets_version": SETS_VERSION,
        "w01_version": w01.W01_VERSION,
        "doc_chars": DOC_CHARS,
    }
    return write_set(root / name, name, description, documents(), MAX_TOKENS, meta)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped sets; write nothing")
    args = parser.parse_args(argv)
    if not args.check:
        for name in GENERATORS:
            print(make(name))
        return 0
    import tempfile

    differ = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in GENERATORS:
            fresh = make(name, Path(tmp))
            for child in fresh.iterdir():
                shipped = SHIPPED_DIR / name / child.name
                if not shipped.is_file() or shipped.read_bytes() != child.read_bytes():
                    differ.append(str(shipped))
    print("\n".join(differ) or "the shipped sets match their generator")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
