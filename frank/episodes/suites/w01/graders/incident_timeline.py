"""Grader: timeline.json is the SEV1 incident's events, in order, with time, event and who."""

import json
import sys
from pathlib import Path

expected = json.loads(Path(sys.argv[1]).read_text())
try:
    got = json.loads(Path("timeline.json").read_text())
except (OSError, json.JSONDecodeError) as exc:
    print(json.dumps({"pass": False, "detail": f"no timeline.json: {exc}"}))
    sys.exit(0)
ok = (
    isinstance(got, list)
    and [
        {k: str(e.get(k, "")).strip().lower() for k in ("time", "event", "by")} if isinstance(e, dict) else e
        for e in got
    ]
    == expected["timeline"]
)
print(
    json.dumps(
        {
            "pass": ok,
            "detail": "timeline matches"
            if ok
            else f"expected {len(expected['timeline'])} events of {expected['incident']}",
        }
    )
)
