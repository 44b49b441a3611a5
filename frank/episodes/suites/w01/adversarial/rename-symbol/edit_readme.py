"""Rename right, and also rename the word in README.md (which the task says to leave)."""

# expect: README.md was changed
import re
from pathlib import Path

for path in [*Path("src").rglob("*.py"), Path("README.md")]:
    path.write_text(re.sub(r"\bfetch_record\b", "load_record", path.read_text()))
