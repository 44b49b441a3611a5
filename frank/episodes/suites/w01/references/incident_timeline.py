"""Reference: find the SEV1 alert, then every pager line of that incident."""

import json
import re
from pathlib import Path

lines = Path("incident/ops-chat.log").read_text().splitlines()
incident = next(re.search(r"ALERT (INC-\d+) SEV1", l).group(1) for l in lines if re.search(r"ALERT INC-\d+ SEV1", l))
timeline = []
for line in lines:
    clock = line[12:20]
    if f"pagerbot: ALERT {incident} " in line:
        timeline.append({"time": clock, "event": "alert", "by": "pagerbot"})
    m = re.search(rf"pagerbot: {incident} (ACK|MITIGATED|RESOLVED) by (\w+)", line)
    if m:
        timeline.append({"time": clock, "event": m.group(1).lower(), "by": m.group(2)})
Path("timeline.json").write_text(json.dumps(timeline, indent=1))
