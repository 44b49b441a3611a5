"""Deterministic synthetic text that the tiny model's BPE tokenizer is trained on.

Code-like and prose text of the kind the seed's agentic coding workload carries: Python, JSON, shell
sessions, tool-call JSON, logs and tracebacks, and some non-ASCII prose. It is generated from a fixed seed
with `random.Random` (whose `random()`/`choice()` streams are stable across Python versions), so the same
builder version always trains the same tokenizer. Stdlib only.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

SEED = 20261130

WORDS = (
    "the a an of to in and or for with on at by from as is are was be not this that it which we you they "
    "request response token tokens prompt cache prefix region engine server model decode prefill verify step "
    "draft accept reject expert experts schedule queue latency throughput memory buffer batch worker thread "
    "process signal timeout retry error warning value result record file path line field config profile knob "
    "start stop restart ready health metrics counter histogram gauge sample window block arm design seed "
    "order test exact permutation sign median mean faster slower change measure run replay workload session "
    "user assistant system tool call output input message content reasoning think answer question code patch "
    "diff commit branch merge build install package module function class method argument return yield "
    "import list dict string number boolean null true false data table row column key index offset length"
).split()

UNICODE_WORDS = (
    "café naïve résumé über straße façade smörgåsbord niño jalapeño Ελληνικά русский текст 中文 日本語 "
    "한국어 العربية עברית हिन्दी ✓ ✗ → ← ≤ ≥ … — – “quoted” «guillemets» 🚀 🔥 ✨ 😀 🧪 µs °C ±0.5 ½ ∑ λ π"
).split()

IDENTS = (
    "path config engine state profile knob value result records tokens prompt request response cache region "
    "worker queue sample window block arm order seed data rows items text line lines count total elapsed "
    "start_s ready_s url port host pid name kind status message payload args kwargs spec draft accepted"
).split()

TOOLS = ("read_file", "write_file", "edit_file", "run_shell", "grep", "list_dir", "search_code", "apply_patch")
EXTS = ("py", "json", "toml", "md", "txt", "sh", "yaml", "rs", "ts", "cfg")
DIRS = ("src", "engine", "tests", "console", "replays", "scripts", "docs", "lib", "app", "bench")
SHELL = (
    "ls -la {d}",
    "git status --short",
    "git diff --stat {p}",
    "pytest -x -q {p}",
    "grep -rn '{w}' {d}/",
    "cat {p}",
    "python -m {m} --help",
    "make test",
    "nvidia-smi --query-gpu=memory.used --format=csv",
    "tail -n 50 {p}",
    "wc -l {p}",
    "sed -n '{n},{m2}p' {p}",
    "find {d} -name '*.{e}'",
    "echo $?",
    "pip install -e .",
    "curl -s http://127.0.0.1:{port}/metrics | grep vllm:",
    "kill -TERM {n}",
)


SYLLABLES = (
    "ba be bi bo bu ca ce ci co cu da de di do du fa fe fi fo ga ge gi go ha he hi ho ka ke ki ko la le li lo "
    "lu ma me mi mo mu na ne ni no nu pa pe pi po pu ra re ri ro ru sa se si so su ta te ti to tu va ve vi vo "
    "za ze zo str tr pl gr cl br ch sh th qu ing er ed ly tion ment ous able ist al ic"
).split()


def _lexicon(seed: int, size: int) -> tuple[str, ...]:
    """Pseudo-words from syllables: the long tail of names a real codebase has."""
    rng = random.Random(seed)
    return tuple("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(size))


LEXICON = _lexicon(SEED + 1, 6000)


def _rare(rng: random.Random) -> str:
    # Zipf-like: low indices far more often, so frequent pseudo-words earn merges and the tail stays rare.
    return LEXICON[min(int(rng.paretovariate(0.8)) - 1, len(LEXICON) - 1)]


def _ident(rng: random.Random) -> str:
    parts = [rng.choice(IDENTS) if rng.random() < 0.6 else _rare(rng) for _ in range(rng.randint(1, 3))]
    style = rng.random()
    if style < 0.7:
        return "_".join(parts)
    if style < 0.9:
        return parts[0] + "".join(p.capitalize() for p in parts[1:])
    return "".join(p.capitalize() for p in parts)


def _path(rng: random.Random) -> str:
    depth = rng.randint(1, 3)
    return "/".join(rng.choice(DIRS) for _ in range(depth)) + f"/{_ident(rng)}.{rng.choice(EXTS)}"


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) if rng.random() < 0.7 else _rare(rng) for _ in range(rng.randint(5, 18))]
    if rng.random() < 0.25:
        words.insert(rng.randrange(len(words)), rng.choice(UNICODE_WORDS))
    if rng.random() < 0.2:
        words.insert(rng.randrange(len(words)), f"{rng.uniform(0, 500):.{rng.randint(0, 3)}f}")
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice((".", ".", ".", "?", "!", ":"))


def prose(rng: random.Random) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(2, 7)))


def python_snippet(rng: random.Random) -> str:
    fn, a, b = _ident(rng), rng.choice(IDENTS), rng.choice(IDENTS)
    indent = "    "
    body = [
        f"def {fn}({a}: {rng.choice(('str', 'int', 'float', 'list[str]', 'dict[str, int]', 'Path'))}, "
        f"{b}=None) -> {rng.choice(('int', 'str', 'bool', 'None', 'dict[str, Any]'))}:",
        f'{indent}"""{_sentence(rng)}"""',
    ]
    for _ in range(rng.randint(2, 6)):
        kind = rng.randrange(6)
        x, y = rng.choice(IDENTS), rng.choice(IDENTS)
        if kind == 0:
            body.append(f"{indent}{x} = {y}.get({json.dumps(rng.choice(IDENTS))}, {rng.randint(0, 99)})")
        elif kind == 1:
            body.append(f"{indent}for {x} in {y}:")
            body.append(f"{indent * 2}if {x} is None:")
            body.append(f"{indent * 3}continue")
        elif kind == 2:
            body.append(f"{indent}if {x} > {rng.randint(0, 4096)}:")
            body.append(f'{indent * 2}raise ValueError(f"{x}={{{x}!r}} is too large")')
        elif kind == 3:
            body.append(f"{indent}{x} = [{y}[i] for i in range(len({y})) if i % {rng.randint(2, 8)} == 0]")
        elif kind == 4:
            body.append(f"{indent}# {_sentence(rng)}")
        else:
            body.append(f'{indent}with open({x}, encoding="utf-8") as handle:')
            body.append(f"{indent * 2}{y} = json.load(handle)")
    body.append(f"{indent}return {rng.choice(IDENTS)}")
    head = rng.choice(("import json\n", "from __future__ import annotations\n\n", "import os\nimport sys\n", ""))
    return head + "\n".join(body) + "\n"


def _json_value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(7 if depth < 2 else 4)
    if kind == 0:
        return rng.randint(-10, 100000)
    if kind == 1:
        return round(rng.uniform(0, 100), rng.randint(1, 4))
    if kind == 2:
        return rng.choice((True, False, None))
    if kind == 3:
        return rng.choice((_ident(rng), _path(rng), _sentence(rng)))
    if kind in (4, 5):
        return {rng.choice(IDENTS): _json_value(rng, depth + 1) for _ in range(rng.randint(1, 4))}
    return [_json_value(rng, depth + 1) for _ in range(rng.randint(1, 4))]


def json_snippet(rng: random.Random) -> str:
    obj = {rng.choice(IDENTS): _json_value(rng) for _ in range(rng.randint(2, 6))}
    return json.dumps(obj, indent=rng.choice((None, 2)), ensure_ascii=rng.random() < 0.5)


def tool_call(rng: random.Random) -> str:
    name = rng.choice(TOOLS)
    args: dict[str, object] = {"path": _path(rng)}
    if name in ("run_shell",):
        args = {"command": shell_line(rng), "timeout": rng.randint(5, 600)}
    elif name in ("grep", "search_code"):
        args = {"pattern": rng.choice(IDENTS), "path": rng.choice(DIRS)}
    elif name in ("edit_file", "apply_patch"):
        args["old"] = rng.choice(IDENTS)
        args["new"] = _ident(rng)
    call = {
        "id": f"call_{rng.getrandbits(48):012x}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    return json.dumps(call) if rng.random() < 0.5 else json.dumps({"name": name, "arguments": args})


def shell_line(rng: random.Random) -> str:
    return rng.choice(SHELL).format(
        d=rng.choice(DIRS),
        p=_path(rng),
        w=rng.choice(IDENTS),
        m=f"{rng.choice(DIRS)}.{rng.choice(IDENTS)}",
        n=rng.randint(1, 400),
        m2=rng.randint(401, 900),
        e=rng.choice(EXTS),
        port=rng.randint(8000, 18999),
    )


def shell_session(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(1, 4)):
        lines.append(f"$ {shell_line(rng)}")
        for _ in range(rng.randint(0, 3)):
            lines.append(
                rng.choice(
                    (
                        f"{_path(rng)}:{rng.randint(1, 900)}: {rng.choice(IDENTS)} = {rng.randint(0, 9999)}",
                        f"{rng.randint(1, 99)} passed, {rng.randint(0, 3)} failed in {rng.uniform(0, 90):.2f}s",
                        f"-rw-r--r-- 1 user user {rng.randint(10, 99999)} Nov {rng.randint(1, 30)} {_path(rng)}",
                        f"INFO {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} {_sentence(rng)}",  # noqa: E501
                    )
                )
            )
    return "\n".join(lines)


def traceback_text(rng: random.Random) -> str:
    frames = [
        f'  File "{_path(rng)}", line {rng.randint(1, 2000)}, in {_ident(rng)}\n    {rng.choice(IDENTS)}()'
        for _ in range(rng.randint(1, 4))
    ]
    exc = rng.choice(("ValueError", "KeyError", "RuntimeError", "FileNotFoundError", "TimeoutError"))
    return "Traceback (most recent call last):\n" + "\n".join(frames) + f"\n{exc}: {_sentence(rng)}"


GENERATORS = (prose, prose, python_snippet, python_snippet, json_snippet, tool_call, shell_session, traceback_text)


def corpus(n_docs: int = 30000, seed: int = SEED) -> Iterator[str]:
    """Yield `n_docs` synthetic documents, the same ones for the same arguments."""
    rng = random.Random(seed)
    for _ in range(n_docs):
        yield rng.choice(GENERATORS)(rng)
