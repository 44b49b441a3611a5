"""Rename, and change what one view returns (in every draw: a literal return if a view has one, else a
count or a key, so the program's behaviour always differs)."""

# expect: differ from the original beyond the rename
import re
from pathlib import Path

for path in Path("src").rglob("*.py"):
    path.write_text(re.sub(r"\bfetch_record\b", "load_record", path.read_text()))
CHANGES = (
    (r"return (\d+)", lambda m: f"return {int(m.group(1)) + 1}"),
    (r"return len\(recs\)", lambda m: "return len(recs) + 1"),
    (r'return rec\["key"\]', lambda m: 'return rec["key"] + "!"'),
)
views = sorted(Path("src/shop").glob("mod_*.py"))
done = False
for pattern, change in CHANGES:
    for path in views:
        text = path.read_text()
        changed = re.sub(pattern, change, text, count=1)
        if changed != text:
            path.write_text(changed)
            done = True
            break
    if done:
        break
