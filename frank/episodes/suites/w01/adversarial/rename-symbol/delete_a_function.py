"""Rename, then delete the first view that used the old name (the old grader counted words)."""

# expect: differ from the original beyond the rename
import re
from pathlib import Path

deleted = False
for path in sorted(Path("src").rglob("*.py")):
    text = path.read_text()
    if not deleted and "rec = fetch_record(" in text:
        start = text.index("def ", text.index("noqa"))
        end = text.index("\n\n\ndef ", start) + 3
        name = text[start + 4 : text.index("(", start)]
        text = text[:start] + text[end:]
        text = text.replace(f"ALL = [{name}, ", "ALL = [").replace(f", {name}]", "]").replace(f", {name},", ",")
        deleted = True
    path.write_text(re.sub(r"\bfetch_record\b", "load_record", text))
