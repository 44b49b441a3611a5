"""Junk: an array nested 20,000 deep."""

# expect: nested too deeply
from pathlib import Path

Path("answer.json").write_text("[" * 20_000 + "]" * 20_000)
