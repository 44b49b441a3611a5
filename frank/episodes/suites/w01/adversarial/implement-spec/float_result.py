"""A near miss: parses right but returns a float (5400.0, not 5400)."""

# expect: hidden cases fail
from pathlib import Path

Path("timeutil/durations.py").write_text("""import re

_PATTERN = re.compile(r"(?:([0-9]+)d)? *(?:([0-9]+)h)? *(?:([0-9]+)m)? *(?:([0-9]+)s)?", re.I | re.A)


def parse_duration(text):
    match = _PATTERN.fullmatch(text.strip(" "))
    if not text.strip(" ") or match is None or not any(match.groups()):
        raise ValueError(text)
    return float(sum(int(v) * f for v, f in zip(match.groups(), (86400, 3600, 60, 1)) if v is not None))
""")
