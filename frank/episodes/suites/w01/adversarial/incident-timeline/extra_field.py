"""The right events with an extra field, and the events as upper case: not what the instruction asks."""

# expect: expected an object of exactly
import json
import re
from pathlib import Path

lines = Path("incident/ops-chat.log").read_text().splitlines()
incident = next(re.search(r"ALERT (INC-\d+) SEV1", l).group(1) for l in lines if re.search(r"ALERT INC-\d+ SEV1", l))
timeline = []
for line in lines:
    m = re.search(rf"pagerbot: {incident} (ACK|MITIGATED|RESOLVED) by (\w+)", line)
    if m:
        timeline.append({"time": line[12:20], "event": m.group(1), "by": m.group(2), "incident": incident})
Path("timeline.json").write_text(json.dumps(timeline))
