"""Junk: NaN inside an event."""

# expect: not JSON
from pathlib import Path

Path("timeline.json").write_text('[{"time": NaN, "event": "alert", "by": "pagerbot"}]')
