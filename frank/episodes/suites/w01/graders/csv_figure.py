"""Grader: answer.txt holds the revenue to the cent."""

import json
import sys
from pathlib import Path

expected = json.loads(Path(sys.argv[1]).read_text())
try:
    value = float(Path("answer.txt").read_text().strip().replace(",", ""))
except (OSError, ValueError) as exc:
    print(json.dumps({"pass": False, "detail": f"no number in answer.txt: {exc}"}))
    sys.exit(0)
ok = abs(round(value * 100) - expected["answer_cents"]) <= 1
print(json.dumps({"pass": ok, "detail": f"answer {value}, expected {expected['answer_cents'] / 100:.2f}"}))
