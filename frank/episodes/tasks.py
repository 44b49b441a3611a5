"""Workspace generators for the built-in W01-like suite: six coding and analysis tasks.

Each generator takes the draw's seed (`draw_seed`: from a secret kept with the run's answers, so frank's
source gives no draw away) and the scale, and returns the workspace's files and the hidden answer the task's
grader compares against (written beside the workspace, never inside it), with the hidden cases the grader runs
drawn per draw. Deterministic: a `random.Random` seeded with a string (stable across Python versions), no
clock, no environment, so the same seed gives the same bytes. `full` workspaces hold about 420-640 KB of text
(about 105K-160K tokens at four characters a token: the size of context a capable agent reads while solving
them); `mini` about 1/80 of that, for tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from frank import readfile

# bytes of workspace text per task at full scale; mini divides by MINI_DIVISOR
FULL_BYTES = {
    "fix-failing-test": 420_000,
    "trace-fault": 560_000,
    "rename-symbol": 470_000,
    "csv-figure": 520_000,
    "implement-spec": 440_000,
    "incident-timeline": 640_000,
}
SCALES = {"mini": 80, "full": 1}
SECRET_FILE = "draws.secret"

WORDS = (
    "account",
    "batch",
    "buffer",
    "cache",
    "channel",
    "checkout",
    "client",
    "config",
    "cursor",
    "delta",
    "entry",
    "event",
    "export",
    "filter",
    "frame",
    "handle",
    "index",
    "invoice",
    "item",
    "journal",
    "key",
    "ledger",
    "limit",
    "marker",
    "merge",
    "offset",
    "order",
    "packet",
    "page",
    "parcel",
    "queue",
    "range",
    "record",
    "region",
    "report",
    "route",
    "sample",
    "schema",
    "session",
    "shard",
    "signal",
    "slot",
    "source",
    "stock",
    "stream",
    "table",
    "ticket",
    "token",
    "total",
    "track",
    "value",
    "window",
)
SERVICES = ("gateway", "orders", "payments", "inventory", "shipping", "catalog", "accounts", "search")
PEOPLE = ("alice", "bob", "carol", "dmitri", "erin", "farah", "gus", "hana", "ivan", "jun")


@dataclass
class Generated:
    files: dict[str, str]
    expected: dict[str, Any] = field(default_factory=dict)


def _rng(seed: int, task: str) -> random.Random:
    return random.Random(f"frank-episodes:{task}:{seed}")


def _target(task: str, scale: str) -> int:
    return FULL_BYTES[task] // SCALES[scale]


def _ident(rng: random.Random, n: int = 2) -> str:
    return "_".join(rng.choice(WORDS) for _ in range(n))


# ---------------------------------------------------------------------------------- fix-failing-test

MOVING_SUM_BUGGY = '''def moving_sum(values, window):
    """Sums of every run of `window` consecutive values, in order (len(values) - window + 1 of them)."""
    if window < 1:
        raise ValueError("window must be at least 1")
    return [sum(values[i:i + window]) for i in range(len(values) - window)]
'''


def _filler_function(rng: random.Random, name: str) -> tuple[str, str, list[int], list[int]]:
    """A small correct function, a passing unittest for it, and the test's argument and expected value."""
    a, b = rng.randint(2, 9), rng.randint(1, 50)
    body = (
        f"def {name}(values):\n"
        f'    """Scale every value by {a}, add {b}, keep those above the mean of the input."""\n'
        f"    if not values:\n        return []\n"
        f"    mean = sum(values) / len(values)\n"
        f"    return [v * {a} + {b} for v in values if v > mean]\n"
    )
    xs = [rng.randint(0, 40) for _ in range(5)]
    mean = sum(xs) / len(xs)
    want = [v * a + b for v in xs if v > mean]
    test = f"    def test_{name}(self):\n        self.assertEqual({name}({xs}), {want})\n"
    return body, test, xs, want


def moving_sum(values: list[int], window: int) -> list[int]:
    """The fixed function: what the hidden cases expect."""
    return [sum(values[i : i + window]) for i in range(len(values) - window + 1)]


def _ledger_hidden_cases(rng: random.Random) -> list[list[Any]]:
    """[module, function, args, want] cases the grader runs beside the tests: drawn per draw (never in
    frank's source), with the edges every draw has (a window longer than the values, as long, of one,
    an empty list), and window 0, which must raise ValueError."""
    draws = [([rng.randint(-50, 50) for _ in range(rng.randint(0, 9))], 0) for _ in range(12)]
    draws = [(values, rng.randint(1, len(values) + 2)) for values, _ in draws]
    values = [rng.randint(-50, 50) for _ in range(rng.randint(2, 6))]
    draws += [(values, len(values) + rng.randint(1, 3)), (values, len(values)), (values, 1), ([], rng.randint(1, 3))]
    rng.shuffle(draws)
    cases = [["ledger.core", "moving_sum", [v, w], {"value": moving_sum(v, w)}] for v, w in draws]
    for _ in range(4):
        v = [rng.randint(-50, 50) for _ in range(rng.randint(0, 8))]
        cases.append(["ledger.core", "running_total", [v], {"value": [sum(v[: i + 1]) for i in range(len(v))]}])
    cases.append(["ledger.core", "moving_sum", [[rng.randint(0, 9), rng.randint(0, 9)], 0], {"raises": "ValueError"}])
    return cases


def gen_fix_failing_test(seed: int, scale: str) -> Generated:
    rng = _rng(seed, "fix-failing-test")
    target = _target("fix-failing-test", scale)
    files: dict[str, str] = {"ledger/__init__.py": '"""Ledger utilities."""\n'}
    core = (
        '"""Core sequence helpers used across the ledger package."""\n\n\n'
        + MOVING_SUM_BUGGY
        + '\n\ndef running_total(values):\n    """Prefix sums."""\n    out, acc = [], 0\n'
        "    for v in values:\n        acc += v\n        out.append(acc)\n    return out\n"
    )
    files["ledger/core.py"] = core
    tests_core = (
        "import unittest\n\nfrom ledger.core import moving_sum, running_total\n\n\n"
        "class CoreTest(unittest.TestCase):\n"
        "    def test_running_total(self):\n        self.assertEqual(running_total([1, 2, 3]), [1, 3, 6])\n\n"
        "    def test_moving_sum(self):\n        self.assertEqual(moving_sum([1, 2, 3, 4], 2), [3, 5, 7])\n\n"
        "    def test_moving_sum_whole(self):\n        self.assertEqual(moving_sum([5, 6], 2), [11])\n"
    )
    files["tests/__init__.py"] = ""
    files["tests/test_core.py"] = tests_core
    core_cases = [
        ("test_running_total", "running_total", [[1, 2, 3]], [1, 3, 6]),
        ("test_moving_sum", "moving_sum", [[1, 2, 3, 4], 2], [3, 5, 7]),
        ("test_moving_sum_whole", "moving_sum", [[5, 6], 2], [11]),
    ]
    # every test's case as data: the grader decides each test's outcome itself, from what the code returns
    cases = [[f"tests.test_core.CoreTest.{t}", "ledger.core", f, a, {"value": w}] for t, f, a, w in core_cases]
    size = len(core) + len(tests_core)
    k = 0
    used: set[str] = set()
    while size < target:
        k += 1
        module, funcs, tests = f"mod_{k:03d}", [], []
        test_class = f"{module.title().replace('_', '')}Test"
        for _ in range(rng.randint(4, 9)):
            name = _ident(rng, 3)
            while name in used:
                name = _ident(rng, 3)
            used.add(name)
            body, test, xs, want = _filler_function(rng, name)
            funcs.append(body)
            tests.append(test)
            cases.append(
                [f"tests.test_{module}.{test_class}.test_{name}", f"ledger.{module}", name, [xs], {"value": want}]
            )
        src = f'"""Helpers for {rng.choice(WORDS)} {rng.choice(WORDS)} handling."""\n\n\n' + "\n\n".join(funcs)
        names = ", ".join(sorted(n.split("(")[0][4:] for n in (f.splitlines()[0] for f in funcs)))
        tsrc = (
            f"import unittest\n\nfrom ledger.{module} import {names}\n\n\n"
            f"class {test_class}(unittest.TestCase):\n" + "\n".join(tests)
        )
        files[f"ledger/{module}.py"] = src
        files[f"tests/test_{module}.py"] = tsrc
        size += len(src) + len(tsrc)
    files["README.md"] = "# ledger\n\nRun the tests with `python -m unittest discover -s tests -t .`.\n"
    tests_sha = {p: _sha(t) for p, t in files.items() if p.startswith("tests/")}
    assert len(cases) == sum(t.count("    def test_") for p, t in files.items() if p.startswith("tests/"))
    hidden = _ledger_hidden_cases(_rng(seed, "fix-failing-test:hidden"))
    return Generated(files, {"tests_sha256": tests_sha, "tests": cases, "hidden": hidden})


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# ------------------------------------------------------------------------------------------ trace-fault


def _ts(base: int, ms: int) -> str:
    total = base * 1000 + ms
    h, rem = divmod(total // 1000, 3600)
    m, s = divmod(rem, 60)
    return f"2025-03-14T{h % 24:02d}:{m:02d}:{s:02d}.{total % 1000:03d}Z"


def _retried_error(rng: random.Random, ms: int, req: str, route: str, component: str | None) -> list[str]:
    """A request whose error a retry fixed (status 200 in the end): a distractor, not the fault."""
    svc = component.split("-")[0] if component else rng.choice(("payments", "inventory", "shipping", "catalog"))
    comp = component or f"{svc}-{rng.choice(('db', 'cache', 'queue'))}"
    block = [
        f"{_ts(36000, ms)} INFO gateway req={req} route={route} upstream=orders",
        f"{_ts(36000, ms + 1)} ERROR {svc} req={req} component={comp} code=E{rng.randint(1000, 9999)} "
        f'msg="transient" retry=1',
    ]
    if rng.random() < 0.5:  # the failure reached orders before the retry fixed it
        block.append(f"{_ts(36000, ms + 2)} WARN orders req={req} upstream={svc} error=upstream_failed retry=1")
    block += [
        f"{_ts(36000, ms + 9)} INFO {svc} req={req} retry=1 ok",
        f"{_ts(36000, ms + 11)} INFO gateway req={req} route={route} status=200 ms=11",
    ]
    return block


def gen_trace_fault(seed: int, scale: str) -> Generated:
    rng = _rng(seed, "trace-fault")
    target = _target("trace-fault", scale)
    lines: list[str] = []
    ms = 0
    size = 0
    failing_at = rng.randint(target // 3, 2 * target // 3)
    root_service = rng.choice(("payments", "inventory", "shipping"))
    root_component = f"{root_service}-db" if rng.random() < 0.5 else f"{root_service}-cache"
    code = f"E{rng.randint(1000, 9999)}"
    failing_req = None
    # distractors at every scale: retried errors spread over the log, one of them in the very component
    # that fails, one just before the failing request
    forced = sorted({target // 7, 2 * target // 7, max(0, failing_at - 400), 5 * target // 7, 6 * target // 7})
    same_component_at = forced[rng.randrange(len(forced))]
    while size < target:
        ms += rng.randint(3, 40)
        req = f"{rng.getrandbits(32):08x}"
        route = f"/api/{rng.choice(WORDS)}/{rng.choice(WORDS)}"
        if failing_req is None and size >= failing_at:
            failing_req = req
            block = [
                f"{_ts(36000, ms)} INFO gateway req={req} route={route} upstream=orders",
                f"{_ts(36000, ms + 2)} INFO orders req={req} call={root_service}",
                f"{_ts(36000, ms + 5)} ERROR {root_service} req={req} component={root_component} code={code} "
                f'msg="{rng.choice(WORDS)} {rng.choice(WORDS)} failed"',
                f"{_ts(36000, ms + 6)} WARN orders req={req} upstream={root_service} error=upstream_failed",
                f"{_ts(36000, ms + 7)} ERROR gateway req={req} route={route} status=502 ms=7",
            ]
        elif forced and size >= forced[0]:
            at = forced.pop(0)
            block = _retried_error(rng, ms, req, route, root_component if at == same_component_at else None)
        elif rng.random() < 0.04:
            block = _retried_error(rng, ms, req, route, None)
        else:
            svc = rng.choice(SERVICES[1:])
            took = rng.randint(2, 90)
            block = [
                f"{_ts(36000, ms)} INFO gateway req={req} route={route} upstream={svc}",
                f"{_ts(36000, ms + 1)} DEBUG {svc} req={req} {rng.choice(WORDS)}={rng.randint(0, 9999)}",
                f"{_ts(36000, ms + took)} INFO gateway req={req} route={route} status=200 ms={took}",
            ]
        lines.extend(block)
        size += sum(len(b) + 1 for b in block)
    files = {
        "logs/service.log": "\n".join(lines) + "\n",
        "README.md": "Logs of one service mesh for one hour. Every line: time, level, service, req=ID, fields.\n",
    }
    return Generated(files, {"request_id": failing_req, "component": root_component, "code": code})


# ----------------------------------------------------------------------------------------- rename-symbol


def gen_rename_symbol(seed: int, scale: str) -> Generated:
    rng = _rng(seed, "rename-symbol")
    target = _target("rename-symbol", scale)
    files: dict[str, str] = {
        "src/shop/__init__.py": "",
        "src/shop/store.py": (
            '"""The record store."""\n\n_RECORDS = {}\n\n\n'
            'def fetch_record(key):\n    """One record by key (a copy)."""\n'
            '    return dict(_RECORDS.get(key, {"key": key}))\n\n\n'
            'def fetch_records_page(keys):\n    """Several records; NOT part of the rename."""\n'
            "    return [fetch_record(k) for k in keys]\n\n\n"
            'def put_record(key, **fields):\n    _RECORDS[key] = {"key": key, **fields}\n'
        ),
    }
    modules: list[str] = []
    values: dict[str, list[Any]] = {}  # what each module's functions return, in ALL's order: the behaviour kept
    size = sum(len(v) for v in files.values())
    k = 0
    while size < target or k < 3:
        k += 1
        name = f"mod_{k:03d}"
        modules.append(name)
        funcs = []
        values[name] = []
        for j in range(rng.randint(3, 7)):
            fname = f"{_ident(rng)}_{j}"
            kind = rng.random()
            if kind < 0.5:
                body = f'    rec = fetch_record({fname!r})\n    return rec["key"]\n'
                values[name].append(fname)
            elif kind < 0.7:
                body = f"    recs = fetch_records_page([{fname!r}, 'x'])\n    return len(recs)\n"
                values[name].append(2)
            else:
                number = rng.randint(0, 99)
                body = f"    return {number}  # {rng.choice(WORDS)} {rng.choice(WORDS)}\n"
                values[name].append(number)
            funcs.append(f'def {fname}():\n    """{rng.choice(WORDS).title()} {rng.choice(WORDS)}."""\n{body}')
        src = (
            f'"""{rng.choice(WORDS).title()} views."""\n'
            "from shop.store import fetch_record, fetch_records_page  # noqa: F401\n\n\n"
            + "\n\n".join(funcs)
            + f"\n\nALL = [{', '.join(f.split('(')[0][4:] for f in funcs)}]\n"
        )
        files[f"src/shop/{name}.py"] = src
        size += len(src)
    main = (
        "from shop import " + ", ".join(modules) + "\n\n\n"
        "def main():\n    total = 0\n"
        f"    for mod in ({', '.join(modules)},):\n"
        "        for fn in mod.ALL:\n            value = fn()\n"
        "            total += value if isinstance(value, int) else len(value)\n"
        '    print(total)\n\n\nif __name__ == "__main__":\n    main()\n'
    )
    files["src/shop/main.py"] = main
    files["README.md"] = (
        "# shop\n\nRun with `PYTHONPATH=src python -m shop.main`.\n"
        "The docs call the old function fetch_record; docs are not code.\n"
    )
    total = sum(v if isinstance(v, int) else len(v) for vs in values.values() for v in vs)
    expected = {
        "sources": {p: v for p, v in files.items() if p.endswith(".py")},  # the original program
        "values": values,
        "output": f"{total}\n",
        "readme": files["README.md"],
    }
    return Generated(files, expected)


# -------------------------------------------------------------------------------------------- csv-figure


def gen_csv_figure(seed: int, scale: str) -> Generated:
    rng = _rng(seed, "csv-figure")
    target = _target("csv-figure", scale)
    regions = ("north", "south", "east", "west", "central")
    region, month = rng.choice(regions), rng.randint(1, 12)
    rows = ["order_id,date,region,product,quantity,unit_price,status"]
    size = len(rows[0])
    cents = 0
    n = 0
    # in every draw, orders of the asked region and month that must not count: one refunded, one cancelled
    forced = dict(zip(rng.sample(range(1, 40), 2), ("refunded", "cancelled")))
    while size < target:
        n += 1
        r = rng.choice(regions) if rng.random() > 0.3 and n not in forced else region
        m = rng.randint(1, 12) if rng.random() > 0.3 and n not in forced else month
        date = f"2025-{m:02d}-{rng.randint(1, 28):02d}"
        qty = rng.randint(1, 20)
        price_cents = rng.randint(99, 99_999)
        status = forced.get(n) or rng.choices(("completed", "refunded", "cancelled"), (8, 1, 1))[0]
        row = f"A{n:07d},{date},{r},{rng.choice(WORDS)}-{rng.randint(1, 99)},{qty},{price_cents // 100}.{price_cents % 100:02d},{status}"  # noqa: E501
        rows.append(row)
        size += len(row) + 1
        if r == region and m == month and status == "completed":
            cents += qty * price_cents
    files = {
        "data/orders.csv": "\n".join(rows) + "\n",
        "QUESTION.md": (
            f"What was the total revenue (quantity x unit_price) of the orders in region "
            f"`{region}` dated in month {month:02d} of 2025 whose status is `completed`?\n"
        ),
    }
    return Generated(files, {"answer_cents": cents, "region": region, "month": month})


# ---------------------------------------------------------------------------------------- implement-spec

SPEC = """## parse_duration(text) -> int

Returns the number of seconds in a duration written as components `<integer><unit>`, with units
`d` (86400 s), `h` (3600 s), `m` (60 s) and `s` (1 s).

- Units are case-insensitive: `1H30M` equals `1h30m`.
- Components may be separated by spaces; leading and trailing spaces are ignored.
- Each unit appears at most once, and units appear in the order d, h, m, s.
- Integers are one or more ASCII digits; zero is allowed (`0s` is 0).
- Anything else raises `ValueError`: an empty string, a bare number (`90`), an unknown unit (`5w`),
  a repeated or out-of-order unit (`1m1h`, `1h1h`), a sign, a decimal point.

Examples: `parse_duration("1h30m") == 5400`, `parse_duration("2d 4s") == 172804`,
`parse_duration(" 45S ") == 45`.
"""


def gen_implement_spec(seed: int, scale: str) -> Generated:
    rng = _rng(seed, "implement-spec")
    target = _target("implement-spec", scale)
    sections = [SPEC]
    size = len(SPEC)
    funcs = []
    while size < target:
        name = _ident(rng, 2)
        a = rng.randint(2, 9)
        sec = (
            f"## {name}(values) -> list (implemented)\n\nMultiplies each value by {a} and drops values "
            f"below {rng.randint(0, 50)}. {' '.join(rng.choice(WORDS) for _ in range(rng.randint(40, 120)))}.\n"
        )
        sections.append(sec)
        funcs.append(f"def {name}(values):\n    return [v * {a} for v in values]\n")
        size += len(sec) + len(funcs[-1])
    rng.shuffle(sections)
    files = {
        "SPEC.md": "# timeutil: specification\n\n" + "\n".join(sections),
        "timeutil/__init__.py": "",
        "timeutil/durations.py": (
            '"""Durations. See SPEC.md."""\n\n\ndef parse_duration(text):\n    raise NotImplementedError\n'
        ),
        "timeutil/misc.py": "\n\n".join(funcs),
    }
    return Generated(files, {"cases": duration_cases(_rng(seed, "implement-spec:hidden"))})


UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
NON_ASCII_ZEROS = (0x0660, 0x06F0, 0x0966, 0xFF10)  # Arabic-Indic, Extended Arabic-Indic, Devanagari, fullwidth


def _duration(rng: random.Random) -> tuple[list[str], int]:
    """A valid duration's components (in order, each unit at most once) and its seconds."""
    parts, total = [], 0
    for i in sorted(rng.sample(range(4), rng.randint(1, 4))):
        value = rng.choice((0, rng.randint(1, 9), rng.randint(10, 999), rng.randint(1000, 99999)))
        digits = ("0" if rng.random() < 0.15 else "") + str(value)
        unit = UNITS[i][0].upper() if rng.random() < 0.3 else UNITS[i][0]
        parts.append(digits + unit)
        total += value * UNITS[i][1]
    return parts, total


def _spaced(rng: random.Random, parts: list[str]) -> str:
    text = parts[0] + "".join(" " * rng.choice((0, 0, 1, 2)) + p for p in parts[1:])
    return " " * rng.choice((0, 0, 1)) + text + " " * rng.choice((0, 0, 1))


def duration_cases(rng: random.Random, good: int = 16, bad: int = 18) -> list[list[Any]]:
    """[text, seconds] of valid durations and [text, None] of texts that must raise ValueError, drawn per
    draw: every rule of SPEC.md's section broken in its own way."""
    cases: list[list[Any]] = []
    for _ in range(good):
        parts, total = _duration(rng)
        cases.append([_spaced(rng, parts), total])
    units = "dhms"
    for k in range(bad):
        n = rng.randint(0, 999)
        i, j = sorted(rng.sample(range(4), 2))
        kind = k % 9
        if kind == 0:  # units out of order
            text = f"{n}{units[j]}{rng.randint(0, 99)}{units[i]}"
        elif kind == 1:  # a unit twice
            text = f"{n}{units[i]}{' ' * rng.randint(0, 1)}{rng.randint(0, 99)}{units[i]}"
        elif kind == 2:  # an unknown unit
            text = f"{n}{rng.choice('wyqx')}"
        elif kind == 3:  # a sign
            text = rng.choice("+-") + "".join(_duration(rng)[0])
        elif kind == 4:  # a decimal point
            text = f"{n}.{rng.randint(1, 9)}{units[i]}"
        elif kind == 5:  # a bare number, or a number after the last unit
            text = str(n) if rng.random() < 0.5 else f"{n}{units[i]}{rng.randint(1, 99)}"
        elif kind == 6:  # a space inside a component
            text = f"{n} {units[i]}"
        elif kind == 7:  # a digit that is not ASCII
            digit = rng.randint(1, 9)
            text = f"{chr(rng.choice(NON_ASCII_ZEROS) + digit)}{units[i]}"
        else:  # components separated by something other than spaces
            parts, _ = _duration(rng)
            parts = parts if len(parts) > 1 else [f"{n}{units[i]}", f"{rng.randint(0, 99)}{units[j]}"]
            text = rng.choice(",;_/+").join(parts)
        cases.append([text, None])
    rng.shuffle(cases)
    return cases


# ------------------------------------------------------------------------------------- incident-timeline


def _clock(s: int) -> str:
    return f"{s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


def gen_incident_timeline(seed: int, scale: str) -> Generated:
    rng = _rng(seed, "incident-timeline")
    target = _target("incident-timeline", scale)
    incidents = [f"INC-{rng.randint(1000, 9999)}" for _ in range(4)]
    sev1 = incidents[rng.randrange(len(incidents))]
    # each incident: alert, ack, mitigated, resolved at increasing times spread over the log
    planned: dict[str, list[tuple[str, str]]] = {}
    for inc in incidents:
        planned[inc] = [("alert", "pagerbot")] + [
            (kind, rng.choice(PEOPLE)) for kind in ("ack", "mitigated", "resolved")
        ]
    total_lines = max(40, target // 94)
    slots = sorted(rng.sample(range(5, total_lines - 5), 4 * len(incidents)))
    rng.shuffle(slots)
    at: dict[int, tuple[str, str, str]] = {}
    for i, inc in enumerate(incidents):
        mine = sorted(slots[4 * i : 4 * i + 4])
        for (kind, who), slot in zip(planned[inc], mine):
            at[slot] = (inc, kind, who)
    lines, expected = [], []
    clock = 9 * 3600
    for n in range(total_lines):
        clock += rng.randint(1, 25)
        stamp = f"[2025-06-02 {_clock(clock)}]"
        if n in at:
            inc, kind, who = at[n]
            sev = "SEV1" if inc == sev1 else rng.choice(("SEV2", "SEV3"))
            if kind == "alert":
                lines.append(
                    f"{stamp} pagerbot: ALERT {inc} {sev} {rng.choice(SERVICES)} {rng.choice(WORDS)} errors above threshold"  # noqa: E501
                )
            else:
                lines.append(f"{stamp} pagerbot: {inc} {kind.upper()} by {who}")
            if inc == sev1:
                expected.append({"time": _clock(clock), "event": kind, "by": who})
        else:
            who = rng.choice(PEOPLE)
            chatter = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 14)))
            if rng.random() < 0.1:
                chatter += f" (re {rng.choice(incidents)})"
            lines.append(f"{stamp} <{who}> {chatter}")
    files = {
        "incident/ops-chat.log": "\n".join(lines) + "\n",
        "README.md": "Ops chat export for one morning, with the pager bot's messages.\n",
    }
    return Generated(files, {"incident": sev1, "timeline": expected})


GENERATORS: dict[str, Callable[[int, str], Generated]] = {
    "fix-failing-test": gen_fix_failing_test,
    "trace-fault": gen_trace_fault,
    "rename-symbol": gen_rename_symbol,
    "csv-figure": gen_csv_figure,
    "implement-spec": gen_implement_spec,
    "incident-timeline": gen_incident_timeline,
}


def draw_seed(secret: str, suite_seed: int, draw: int) -> int:
    """Each draw's own seed, from a secret kept with the run's answers (`load_secret`): draws of one run
    get different workspaces, answers and hidden cases, draw k is the same wherever the secret is (an
    experiment's cells share one, so its arms face the same tasks), and frank's source gives none away."""
    digest = hashlib.sha256(f"frank-episodes-draw:{secret}:{suite_seed}:{draw}".encode()).hexdigest()
    return int(digest[:12], 16)


def load_secret(path: Path, given: str | None = None) -> str:
    """The secret stored at `path` (0600, in a 0700 folder), written first (`given`, or a fresh random
    one) if there is none yet."""
    path = Path(path)
    if path.is_file():
        return readfile.read_text(path, readfile.TEXT).strip()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    secret = given or secrets.token_hex(16)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secret + "\n")
    return secret


def run_secret(root: Path, given: str | None = None) -> str:
    """A run's secret, kept with its hidden answers (`<root>/answers/`, out of the sandbox's reach)."""
    return load_secret(Path(root) / "answers" / SECRET_FILE, given)


def answer_path(root: Path, key: str) -> Path:
    """Where an episode's hidden answer lives: `<root>/answers/`, apart from `<root>/workspaces/` (the
    sandbox mounts the one workspace, never its parents)."""
    return Path(root) / "answers" / f"{key}.expected.json"


class WorkspaceSource(Protocol):
    """What `materialize` reads of a suite's task (frank.episodes.suite.TaskSpec; that module imports this one)."""

    @property
    def generator(self) -> str | None: ...
    @property
    def workspace(self) -> str: ...
    @property
    def expected(self) -> Path | None: ...


def materialize(task: WorkspaceSource, seed: int, scale: str, dest: Path, answer: Path) -> Path | None:
    """Create the task's workspace at `dest` (which must not exist) and its hidden answer at `answer`
    (outside the workspace). Returns the answer's path (None for a fixture workspace without one)."""
    dest = Path(dest)
    if dest.exists():
        raise FileExistsError(dest)
    answer = Path(answer)
    if answer.resolve().is_relative_to(dest.resolve()):
        raise ValueError(f"the hidden answer {answer} would be inside the workspace {dest}")
    answer.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if task.generator is None:
        shutil.copytree(task.workspace, dest, symlinks=True)
        if task.expected is None:
            return None
        shutil.copyfile(task.expected, answer)
        return answer
    generated = GENERATORS[task.generator](seed, scale)
    for rel, text in sorted(generated.files.items()):
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    dest.mkdir(parents=True, exist_ok=True)
    answer.write_text(json.dumps(generated.expected, sort_keys=True, indent=1), encoding="utf-8")
    return answer
