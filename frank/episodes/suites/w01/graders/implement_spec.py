"""Grader: parse_duration against hidden cases of what SPEC.md says, run as a user's Python run would call it:
the edge cases below and cases drawn per draw (from the hidden answer); each result is compared here in type
and value (an int, not 5400.0), and every bad input must raise ValueError."""

from frank.episodes.judge import Fail, cases, grade, probe, same

GOOD = {
    "1h30m": 5400,
    "2d 4s": 172804,
    " 45S ": 45,
    "0s": 0,
    "0h0m": 0,
    "1d2h3m4s": 93784,
    "1d 2h 3m 4s": 93784,
    "10M": 600,
    "1H30M": 5400,
    "2D": 172800,
    "3h 0m": 10800,
    "1h  30m": 5400,
    "007s": 7,
    "100000d": 8640000000,
}
BAD = [
    "",
    " ",
    "90",
    "h",
    "5w",
    "1m1h",
    "30m 1h",
    "1h1h",
    "1h 1h",
    "-5s",
    "+5s",
    "1.5h",
    "1 h",
    "1h 30 m",
    "1h30",
    "1hh",
    "1h,30m",
    "\u0661h",  # ARABIC-INDIC DIGIT ONE: SPEC.md allows ASCII digits only
    "\uff11h",  # FULLWIDTH DIGIT ONE
]
PROBE = """
from timeutil.durations import parse_duration
_emit({"cases": [_call(parse_duration, text) for text in _INPUT]})
"""


def check(expected):
    want = {**dict.fromkeys(BAD), **GOOD, **dict(expected["cases"])}  # None: must raise ValueError
    texts = list(want)
    results = cases(probe(PROBE, texts, cpu_s=3, wall_s=30), "cases", len(texts))
    failures = []
    for text, got in zip(texts, results):
        if want[text] is not None and not same(got, {"value": want[text]}):
            failures.append(f"{text!r}: {_shown(got)}, expected {want[text]}")
        elif want[text] is None and not (isinstance(got, dict) and got.get("value_error") is True):
            failures.append(f"{text!r}: {_shown(got)}, expected ValueError")
    if failures:
        raise Fail(f"{len(failures)} of {len(texts)} hidden cases fail: " + "; ".join(failures[:4]))
    return f"meets the spec ({len(texts)} hidden cases)"


def _shown(got) -> str:
    if isinstance(got, dict) and "value" in got:
        return f"returned {got['value']!r} ({type(got['value']).__name__})"
    if isinstance(got, dict) and "raised" in got:
        return f"raised {str(got['raised'])[:40]}"
    return f"gave {str(got)[:60]}"


grade(check)
