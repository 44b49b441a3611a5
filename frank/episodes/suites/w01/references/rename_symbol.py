"""Reference: a whole-word rename in every Python file."""

import re
from pathlib import Path

for path in Path("src").rglob("*.py"):
    path.write_text(re.sub(r"\bfetch_record\b", "load_record", path.read_text()))
