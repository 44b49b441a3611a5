"""A near miss: `\\d` accepts digits that SPEC.md forbids (the old reference's mistake)."""

# expect: hidden cases fail
from pathlib import Path

Path("timeutil/durations.py").write_text("""import re

_PATTERN = re.compile(r"(?:(\\\\d+)d)? *(?:(\\\\d+)h)? *(?:(\\\\d+)m)? *(?:(\\\\d+)s)?", re.IGNORECASE)


def parse_duration(text):
    match = _PATTERN.fullmatch(text.strip(" "))
    if not text.strip(" ") or match is None or not any(match.groups()):
        raise ValueError(text)
    return sum(int(v) * f for v, f in zip(match.groups(), (86400, 3600, 60, 1)) if v is not None)
""")
