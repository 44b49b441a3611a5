"""GET paths of the engine frank runs, with its control token, and print them as one JSON object (path ->
the JSON reply, or the text for /metrics). The GPU run's scripts read the plugins' state with it.

    python3 scripts/engine_control_get.py /frank/parts /frank/region-cache /metrics
"""

from __future__ import annotations

import json
import sys

import httpx

from frank.engine.controller import EngineController


def main(paths: list[str]) -> int:
    controller = EngineController()
    url, token = controller.status().url, controller.token or ""
    if not url:
        print(json.dumps({"error": "no engine running"}))
        return 1
    out: dict[str, object] = {}
    with httpx.Client(base_url=url, headers={"X-Frank-Token": token}, timeout=10) as client:
        for path in paths:
            reply = client.get(path)
            try:
                out[path] = reply.json() if path != "/metrics" else reply.text
            except ValueError:
                out[path] = {"status": reply.status_code, "text": reply.text[:500]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
