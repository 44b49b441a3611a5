"""Junk: NaN where strings go."""

# expect: not JSON
from pathlib import Path

Path("answer.json").write_text('{"request_id": NaN, "component": Infinity, "code": -Infinity}')
