"""Junk: a syntax error."""

# expect: exited with status 1
from pathlib import Path

Path("timeutil/durations.py").write_text("def parse_duration(text:\n")
