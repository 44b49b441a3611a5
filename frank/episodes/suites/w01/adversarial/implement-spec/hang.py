"""A hang: parse_duration never returns."""

# expect: ran past the CPU time limit
from pathlib import Path

Path("timeutil/durations.py").write_text("def parse_duration(text):\n    while True:\n        pass\n")
