"""Rename, and change what one view returns."""

# expect: differ from the original beyond the rename
import re
from pathlib import Path

for path in Path("src").rglob("*.py"):
    path.write_text(re.sub(r"\bfetch_record\b", "load_record", path.read_text()))
views = Path("src/shop/mod_001.py")
views.write_text(re.sub(r"return (\d+)", lambda m: f"return {int(m.group(1)) + 1}", views.read_text(), count=1))
