"""Junk: a rename that leaves a syntax error behind."""

# expect: does not parse
import re
from pathlib import Path

for path in Path("src").rglob("*.py"):
    path.write_text(re.sub(r"\bfetch_record\b", "load_record", path.read_text()))
store = Path("src/shop/store.py")
store.write_text(store.read_text().replace("def load_record(key):", "def load_record(key:"))
