"""A near miss: blame the first error with a component, which a retry fixed (a distractor)."""

# expect: wrong: ['request_id'
import json
import re
from pathlib import Path

line = next(l for l in Path("logs/service.log").read_text().splitlines() if " ERROR " in l and "retry=1" in l)
Path("answer.json").write_text(
    json.dumps(
        {
            k: re.search(rf"{p}=(\S+)", line).group(1)
            for k, p in (("request_id", "req"), ("component", "component"), ("code", "code"))
        }
    )
)
