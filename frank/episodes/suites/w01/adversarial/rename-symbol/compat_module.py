"""Rename right, and add a module that brings the old name back."""

# expect: the files under src/ changed
import re
from pathlib import Path

for path in Path("src").rglob("*.py"):
    path.write_text(re.sub(r"\bfetch_record\b", "load_record", path.read_text()))
Path("src/shop/compat.py").write_text("from shop.store import load_record as fetch_record  # noqa: F401\n")
