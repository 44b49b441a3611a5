"""Make the shipped fidelity sets (frank/fidelity/sets/{code,agent,prose,short}), deterministically.

    python -m frank.fidelity.make_sets            rewrite the shipped sets
    python -m frank.fidelity.make_sets --check    exit 1 if regenerating would change a shipped byte

- code: Python, JSON, shell sessions and tracebacks from the tiny model's corpus generators
  (frank/engine/models/tiny_corpus.py).
- agent: transcripts of synthetic W01 conversations (frank/workloads/w01.py, mini, seed 1): the task, the assistant's
  tool calls and the tool results, as an agent's context carries them.
- prose: sentences and paragraphs from the corpus's prose generator.
- short: the first two documents of each of the three, cut to SHORT_CHARS characters (an agent one to its
  conversation's tail, not the repository context) and SHORT_MAX_TOKENS tokens: 6 x 32 = 192 scored
  positions, for engines that score one position per request (llama.cpp: one HTTP request each).

Every generator is seeded with strings (stable across Python versions). SETS_VERSION is bumped whenever the
bytes change on purpose; a set's identity everywhere else is its sha256.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from frank.engine.models import tiny_corpus
from frank.fidelity.sets import SHIPPED_DIR, Document, write_set
from frank.workloads import w01

SETS_VERSION = 1
DOCUMENTS = 8
DOC_CHARS = 2400  # about 600-700 tiny-tokenizer tokens: every document fills max_tokens
MAX_TOKENS = 512
SHORT_PER_SET = 2
SHORT_CHARS = 600  # about 150 tiny-tokenizer tokens: every document fills SHORT_MAX_TOKENS
SHORT_MAX_TOKENS = 33


def _fill(rng: random.Random, parts: tuple[Callable[[random.Random], str], ...], chars: int) -> str:
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
    conversation = _conversation(body)[-(chars // 2) :]
    system = body["messages"][0]["content"][: max(0, chars - len(conversation) - 12)]
    return f"[system]\n{system}\n\n{conversation}"


def _conversation(body: dict[str, Any]) -> str:
    """The task, each tool call and its result (every message after the system one)."""
    turns = []
    for message in body["messages"][1:]:
        role, content = message["role"], message.get("content") or ""
        calls = "".join(
            f"\n<tool_call>{c['function']['name']}({c['function']['arguments']})</tool_call>"
            for c in message.get("tool_calls") or []
        )
        turns.append(f"[{role}]\n{content}{calls}")
    return "\n\n".join(turns)


def _last_requests() -> Iterator[tuple[str, dict[str, Any]]]:
    """(episode, body) of each conversation's last request (it carries the whole conversation), draw 1 then 2."""
    for _draw, records in w01.generate("mini", seed=1):
        last: dict[str, dict[str, Any]] = {}
        for record in records:
            last[record["episode"]] = record
        for episode, record in last.items():
            yield episode, record["body"]


def agent_documents() -> Iterator[Document]:
    for n, (episode, body) in enumerate(_last_requests(), 1):
        yield Document(f"agent-{episode}", _transcript(body, DOC_CHARS))
        if n == DOCUMENTS:
            return


def short_documents() -> Iterator[Document]:
    """Two of each kind, short: code and prose cut from their sets' first documents, agent the tail of a
    conversation (tool calls and results; the repository context would fill a short document alone)."""
    for gen in (code_documents, prose_documents):
        for _, doc in zip(range(SHORT_PER_SET), gen()):
            yield Document(f"short-{doc.id}", doc.text[:SHORT_CHARS])
    for _, (episode, body) in zip(range(SHORT_PER_SET), _last_requests()):
        yield Document(f"short-agent-{episode}", _conversation(body)[-SHORT_CHARS:])


GENERATORS = {
    "code": (code_documents, "Code: Python, JSON, shell sessions and tracebacks (tiny-corpus generators)"),
    "agent": (agent_documents, "Agent transcripts: synthetic W01 conversations (mini, seed 1), tool calls and results"),
    "prose": (prose_documents, "Prose: paragraphs of the tiny corpus's prose, with some non-ASCII words"),
    "short": (short_documents, "Short: two documents each of code, agent transcripts and prose, 32 positions each"),
}


def make(name: str, root: Path = SHIPPED_DIR) -> Path:
    documents, description = GENERATORS[name]
    short = name == "short"
    meta = {
        "generator": "frank.fidelity.make_sets",
        "sets_version": SETS_VERSION,
        "w01_version": w01.W01_VERSION,
        "doc_chars": SHORT_CHARS if short else DOC_CHARS,
    }
    max_tokens = SHORT_MAX_TOKENS if short else MAX_TOKENS
    return write_set(root / name, name, description, documents(), max_tokens, meta)


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
