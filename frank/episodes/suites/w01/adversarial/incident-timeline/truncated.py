"""Junk: a timeline cut off mid-write."""

# expect: not JSON
from pathlib import Path

Path("timeline.json").write_text('[{"time": "09:00:01", "event": "alert", "by": "pag')
