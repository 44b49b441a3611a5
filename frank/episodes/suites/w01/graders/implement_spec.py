"""Grader: parse_duration against hidden cases from SPEC.md."""

import json
import sys

sys.path.insert(0, ".")
from timeutil.durations import parse_duration  # noqa: E402

good = {"1h30m": 5400, "2d 4s": 172804, " 45S ": 45, "0s": 0, "1d2h3m4s": 93784, "10M": 600, "3h 0m": 10800}
bad = ["", "90", "5w", "1m1h", "1h1h", "-5s", "1.5h", "h", " "]
failures = []
for text, want in good.items():
    try:
        got = parse_duration(text)
    except Exception as exc:  # noqa: BLE001 -- any exception is a wrong answer here
        got = f"{type(exc).__name__}"
    if got != want:
        failures.append(f"{text!r}: {got!r} != {want}")
for text in bad:
    try:
        got = parse_duration(text)
        failures.append(f"{text!r}: returned {got!r}, expected ValueError")
    except ValueError:
        pass
    except Exception as exc:  # noqa: BLE001
        failures.append(f"{text!r}: {type(exc).__name__}, expected ValueError")
print(json.dumps({"pass": not failures, "detail": "; ".join(failures[:5]) or "meets the spec"}))
