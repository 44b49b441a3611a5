"""Reference: a regular expression over the ordered units."""

from pathlib import Path

Path("timeutil/durations.py").write_text('''"""Durations. See SPEC.md."""
import re

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PATTERN = re.compile(r"(?:(\\d+)d)?\\s*(?:(\\d+)h)?\\s*(?:(\\d+)m)?\\s*(?:(\\d+)s)?", re.IGNORECASE)


def parse_duration(text):
    stripped = text.strip()
    match = _PATTERN.fullmatch(stripped)
    if not stripped or match is None or not any(match.groups()):
        raise ValueError(f"not a duration: {text!r}")
    return sum(int(v) * f for v, f in zip(match.groups(), _UNITS.values()) if v is not None)
''')
