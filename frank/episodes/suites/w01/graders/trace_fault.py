"""Grader: answer.json names the failed request, the root-cause component and its error code."""

import json
import sys
from pathlib import Path

expected = json.loads(Path(sys.argv[1]).read_text())
answer_path = Path("answer.json")
if not answer_path.is_file():
    print(json.dumps({"pass": False, "detail": "no answer.json"}))
    sys.exit(0)
try:
    answer = json.loads(answer_path.read_text())
except json.JSONDecodeError as exc:
    print(json.dumps({"pass": False, "detail": f"answer.json is not JSON: {exc}"}))
    sys.exit(0)
keys = ("request_id", "component", "code")
wrong = [k for k in keys if not isinstance(answer, dict) or str(answer.get(k, "")).strip() != expected[k]]
print(json.dumps({"pass": not wrong, "detail": f"wrong: {wrong}" if wrong else "root cause found"}))
