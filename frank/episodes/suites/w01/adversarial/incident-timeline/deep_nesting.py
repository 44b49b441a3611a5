"""Junk: objects nested 20,000 deep."""

# expect: nested too deeply
from pathlib import Path

Path("timeline.json").write_text('{"a":' * 20_000 + "1" + "}" * 20_000)
