"""A near miss: drops every space first, so `1 h` and `1h 30 m` pass as durations."""

# expect: hidden cases fail
from pathlib import Path

Path("timeutil/durations.py").write_text("""import re

_PATTERN = re.compile(r"(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?", re.I | re.A)


def parse_duration(text):
    match = _PATTERN.fullmatch(text.replace(" ", ""))
    if match is None or not any(match.groups()):
        raise ValueError(text)
    return sum(int(v) * f for v, f in zip(match.groups(), (86400, 3600, 60, 1)) if v is not None)
""")
