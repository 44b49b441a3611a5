"""A stray copy that the instruction's command runs instead: src/ is renamed right, and the original package
is copied to shop/ at the workspace root, which `PYTHONPATH=src python -m shop.main` puts on the path first,
so the program that runs still has fetch_record. A grader that judges src/ and imports it from there alone
passes it (the old one did)."""

# expect: would import shop from shop
import re
import shutil
from pathlib import Path

shutil.copytree("src/shop", "shop")
for path in Path("src").rglob("*.py"):
    path.write_text(re.sub(r"\bfetch_record\b", "load_record", path.read_text()))
