"""Reference: a regular expression over the ordered units, as SPEC.md says it: ASCII digits only, units
case-insensitive, components separated by spaces (and only spaces), leading and trailing spaces ignored."""

from pathlib import Path

Path("timeutil/durations.py").write_text('''"""Durations. See SPEC.md."""
import re

_UNITS = (86400, 3600, 60, 1)
_PATTERN = re.compile(r"(?:([0-9]+)d)? *(?:([0-9]+)h)? *(?:([0-9]+)m)? *(?:([0-9]+)s)?", re.IGNORECASE | re.ASCII)


def parse_duration(text):
    stripped = text.strip(" ")
    match = _PATTERN.fullmatch(stripped)
    if not stripped or match is None or not any(match.groups()):
        raise ValueError(f"not a duration: {text!r}")
    return sum(int(v) * f for v, f in zip(match.groups(), _UNITS) if v is not None)
''')
