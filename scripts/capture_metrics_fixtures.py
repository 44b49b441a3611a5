"""Capture /metrics fixtures from the REAL embedded engine for tests/unit/test_metrics.py.

Starts the embedded-cpu profile's exact command (frank.engine.controller's dry run) three times, one at a time:
  1. spec decoding on: warm-up request, `before.txt`, one measured chat request, `after.txt` (settled);
     the response's usage and client timing go to `request.json`
  2. the same engine restarted: one small request, `after_restart.txt` (counters lower than after.txt)
  3. without --speculative-config: `no_spec_decode_before.txt`, one request, `no_spec_decode.txt` (settled;
     no spec_decode series)
Run from the repo root with the console venv:  .venv/bin/python scripts/capture_metrics_fixtures.py [--only-nospec]
(FRANK_MODELS must hold a built tiny-frank; about 4 minutes on 2 cores.)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from frank.engine import metrics as m  # noqa: E402
from frank.engine.controller import EngineController  # noqa: E402

OUT = REPO / "tests" / "fixtures" / "metrics"
PROMPT = "The operator watches the GPU, the PCIe link and the CPU expert pool next to the engine's own timings. " * 12


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(spec_decode: bool, log: Path) -> tuple[subprocess.Popen, str]:
    spec = EngineController().dry_run("embedded-cpu", port=free_port())
    argv = list(spec.argv)
    if not spec_decode:
        i = argv.index("--speculative-config")
        del argv[i : i + 2]
    env = {**os.environ, **spec.env, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        argv, env=env, cwd=REPO, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.monotonic() + 400
    with httpx.Client(timeout=2) as c:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"engine exited {proc.returncode}; see {log}")
            try:
                if c.get(spec.url + "/health").status_code == 200:
                    return proc, spec.url
            except httpx.HTTPError:
                pass
            time.sleep(1)
    stop(proc)
    raise SystemExit(f"engine not ready in 400 s; see {log}")


def stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def chat(c: httpx.Client, url: str, max_tokens: int) -> tuple[dict, float]:
    body = {
        "model": "tiny-frank",
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
    }
    t0 = time.monotonic()
    resp = c.post(url + "/v1/chat/completions", json=body)
    resp.raise_for_status()
    return resp.json(), time.monotonic() - t0


def scrape(c: httpx.Client, url: str) -> str:
    resp = c.get(url + "/metrics")
    resp.raise_for_status()
    return resp.text


def settled_text(c: httpx.Client, url: str, before: m.MetricsSample) -> str:
    for _ in range(100):
        text = scrape(c, url)
        if m.parse_metrics(text).hist(m.E2E)[1] > before.hist(m.E2E)[1]:
            return text
        time.sleep(0.02)
    raise SystemExit("the request never showed up in /metrics")


def capture_spec(c: httpx.Client, logs: Path) -> dict:
    proc, url = launch(True, logs / "spec.log")
    try:
        chat(c, url, 8)  # warm-up: also puts the prompt in the prefix cache
        time.sleep(0.5)
        before_text = scrape(c, url)
        response, client_s = chat(c, url, 48)
        after_text = settled_text(c, url, m.parse_metrics(before_text))
    finally:
        stop(proc)
    (OUT / "before.txt").write_text(before_text)
    (OUT / "after.txt").write_text(after_text)
    (OUT / "request.json").write_text(
        json.dumps({"usage": response["usage"], "client_s": client_s, "max_tokens": 48}, indent=2) + "\n"
    )
    proc, url = launch(True, logs / "restart.log")
    try:
        chat(c, url, 4)
        time.sleep(0.5)
        (OUT / "after_restart.txt").write_text(scrape(c, url))
    finally:
        stop(proc)
    return {"usage": response["usage"], "client_s": round(client_s, 3)}


def capture_nospec(c: httpx.Client, logs: Path) -> dict:
    proc, url = launch(False, logs / "nospec.log")
    try:
        before_text = scrape(c, url)
        response, client_s = chat(c, url, 16)
        after_text = settled_text(c, url, m.parse_metrics(before_text))
    finally:
        stop(proc)
    (OUT / "no_spec_decode_before.txt").write_text(before_text)
    (OUT / "no_spec_decode.txt").write_text(after_text)
    (OUT / "no_spec_request.json").write_text(
        json.dumps({"usage": response["usage"], "client_s": client_s, "max_tokens": 16}, indent=2) + "\n"
    )
    return {"nospec_usage": response["usage"]}


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    logs = REPO / ".build" / "capture-logs"
    logs.mkdir(parents=True, exist_ok=True)
    result: dict = {}
    with httpx.Client(timeout=120) as c:
        if "--only-nospec" not in sys.argv:
            result.update(capture_spec(c, logs))
        result.update(capture_nospec(c, logs))
    result["fixtures"] = sorted(p.name for p in OUT.iterdir())
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
