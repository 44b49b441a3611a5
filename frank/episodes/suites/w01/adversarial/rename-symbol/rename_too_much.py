"""A near miss: a rename without word boundaries also renames fetch_records_page."""

# expect: differ from the original beyond the rename
from pathlib import Path

for path in Path("src").rglob("*.py"):
    path.write_text(path.read_text().replace("fetch_record", "load_record"))
