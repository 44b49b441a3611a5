"""Reference: the one 502 at the gateway, then the ERROR line of the same request that names a component."""

import json
import re
from pathlib import Path

lines = Path("logs/service.log").read_text().splitlines()
req = next(re.search(r"req=(\w+)", l).group(1) for l in lines if " gateway " in l and "status=502" in l)
cause = next(l for l in lines if f"req={req} " in l and " ERROR " in l and "component=" in l)
Path("answer.json").write_text(
    json.dumps(
        {
            "request_id": req,
            "component": re.search(r"component=(\S+)", cause).group(1),
            "code": re.search(r"code=(\S+)", cause).group(1),
        }
    )
)
