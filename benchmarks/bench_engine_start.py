"""Start-to-ready: the bare vLLM server command against the controller's start, side by side in one run.

    .venv/bin/python benchmarks/bench_engine_start.py [--rounds 2] [--profile embedded-cpu] [--json]

Each round starts the bare command (the exact argv/env of the profile's dry run, spawned directly) and the
controller (supervisor, state files, health polling), in alternating order, and prints seconds from spawn to
the first /health 200. The difference is the controller's overhead.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from frank.engine.controller import EngineController, _wait_group_gone  # noqa: E402
from frank.engine.kinds import build_launch  # noqa: E402
from frank.engine.profiles import load_profile  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bare_start(profile_name: str) -> float:
    prof = load_profile(profile_name)
    spec = build_launch(prof, prof.default_knobs(), free_port(), "bench-token")
    t0 = time.monotonic()
    proc = subprocess.Popen(
        spec.argv,
        env={**os.environ, **spec.env},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"bare server exited with {proc.returncode}")
            try:
                if httpx.get(spec.url + "/health", timeout=2).status_code == 200:
                    return time.monotonic() - t0
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        if not _wait_group_gone(proc.pid, 10):
            os.killpg(proc.pid, signal.SIGKILL)
            _wait_group_gone(proc.pid, 10)


def controller_start(profile_name: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="frank-bench-") as home:
        controller = EngineController(state_dir=Path(home))
        t0 = time.monotonic()
        status = controller.start(profile_name)
        wall = time.monotonic() - t0
        controller.stop()
        return wall, status.ready_s or float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profile", default="embedded-cpu")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    bare, ctl, ctl_ready = [], [], []
    for round_no in range(args.rounds):
        order = ("bare", "controller") if round_no % 2 == 0 else ("controller", "bare")
        for which in order:
            if which == "bare":
                bare.append(bare_start(args.profile))
            else:
                wall, ready = controller_start(args.profile)
                ctl.append(wall)
                ctl_ready.append(ready)
            print(f"round {round_no + 1} {which:<10} {(bare if which == 'bare' else ctl)[-1]:6.1f} s", file=sys.stderr)
    result = {
        "profile": args.profile,
        "rounds": args.rounds,
        "bare_s": bare,
        "controller_s": ctl,
        "controller_ready_s": ctl_ready,
        "bare_median_s": statistics.median(bare),
        "controller_median_s": statistics.median(ctl),
        "overhead_s": statistics.median(ctl) - statistics.median(bare),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"bare server command: median {result['bare_median_s']:.1f} s  ({', '.join(f'{x:.1f}' for x in bare)})")
        print(
            f"controller start:    median {result['controller_median_s']:.1f} s  ({', '.join(f'{x:.1f}' for x in ctl)})"
            f"  ready_s as recorded {', '.join(f'{x:.1f}' for x in ctl_ready)}"
        )
        print(f"controller overhead: {result['overhead_s']:+.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
