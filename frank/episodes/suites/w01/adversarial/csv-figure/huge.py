"""Junk: five megabytes of digits."""

# expect: larger than
from pathlib import Path

Path("answer.txt").write_text("9" * 5_000_000 + ".00\n")
