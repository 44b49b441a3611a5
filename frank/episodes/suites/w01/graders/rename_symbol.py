"""Grader: fetch_record is gone from the code, load_record replaces every use, fetch_records_page and the
README are untouched, and the program still runs."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

expected = json.loads(Path(sys.argv[1]).read_text())
code = "".join(p.read_text() for p in sorted(Path("src").rglob("*.py")))
count = {name: len(re.findall(rf"\b{name}\b", code)) for name in ("fetch_record", "load_record", "fetch_records_page")}
problems = []
if count["fetch_record"]:
    problems.append(f"{count['fetch_record']} use(s) of fetch_record left")
if count["load_record"] != expected["load_record"]:
    problems.append(f"load_record appears {count['load_record']} times, expected {expected['load_record']}")
if count["fetch_records_page"] != expected["fetch_records_page"]:
    problems.append("fetch_records_page was changed")
if not Path("README.md").is_file() or Path("README.md").read_text() != expected["readme"]:
    problems.append("README.md was changed")
if not problems:
    run = subprocess.run(
        [sys.executable, "-m", "shop.main"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": "src"},
    )
    if run.returncode != 0:
        problems.append("shop.main fails: " + (run.stderr.strip().splitlines() or ["?"])[-1][:200])
print(json.dumps({"pass": not problems, "detail": "; ".join(problems) or "renamed"}))
