"""A near miss: the right sum plus one cent (the old grader tolerated a cent)."""

# expect: expected
import csv
import re
from pathlib import Path

question = Path("QUESTION.md").read_text()
region, month = re.search(r"region `(\w+)`", question).group(1), re.search(r"month (\d+)", question).group(1)
cents = 1
with open("data/orders.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        if row["region"] == region and row["date"][5:7] == month and row["status"] == "completed":
            whole, frac = row["unit_price"].split(".")
            cents += int(row["quantity"]) * (int(whole) * 100 + int(frac))
Path("answer.txt").write_text(f"{cents // 100}.{cents % 100:02d}\n")
