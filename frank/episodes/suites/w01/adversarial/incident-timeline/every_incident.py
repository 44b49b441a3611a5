"""A near miss: the pager events of every incident, not the SEV1's alone."""

# expect: expected
import json
import re
from pathlib import Path

timeline = []
for line in Path("incident/ops-chat.log").read_text().splitlines():
    clock = line[12:20]
    if "pagerbot: ALERT " in line:
        timeline.append({"time": clock, "event": "alert", "by": "pagerbot"})
    m = re.search(r"pagerbot: INC-\d+ (ACK|MITIGATED|RESOLVED) by (\w+)", line)
    if m:
        timeline.append({"time": clock, "event": m.group(1).lower(), "by": m.group(2)})
Path("timeline.json").write_text(json.dumps(timeline))
