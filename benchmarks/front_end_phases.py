"""Where a warm full-scale request's front end goes, phase by phase, against the empty-region floor.

Runs benchmarks/profile_region_cache_engine.py (its own engine per arm, one request at a time, draw-1 of
W01 full, one output token; no py-spy) with a timing probe in every vLLM process
(benchmarks/front_end_phases/: a sitecustomize that wraps the methods at each phase boundary once vLLM has
loaded its plugins, so frank's parts are inside the wrappers). For the warm requests (not a conversation's
first turn) it prints, per arm, the mean and median milliseconds of each phase of the seed's front-end
measure (TTFT - queue - prefill = arrival to QUEUED in the engine core + the first token's trip back):

  render     render_chat: the chat template and the tokenization (the region cache)    API server
  to add     the rest of the OpenAI layer up to AsyncLLM.add_request                      API server
  add        output processor set-up (detokenizer), up to the engine client's send         API server
  send       the engine client's encode and send (held-prompt's plan)                      API server
  wire       the socket and the engine core's decode                                       engine core
  preprocess preprocess_add_request: held-prompt's rebuild, vLLM's Request (its copy)      engine core
  to queue   the input queue to the scheduler's add_request (the QUEUED event)              engine core
  first out  update_from_output of the first token (its timestamp ends prefill)            engine core
  back       the first token's outputs to the API server's output processor                both

and the cyclic GC's time inside each request's window, the minor page faults inside the core's calls,
`in X`: the milliseconds inside each wrapped call of the request's window (held-prompt's rebuild and hold,
vLLM's Request, its append of an output token and its free of a finished request, the output thread's
send, ...), and `to queue: wake`: from the end of preprocessing to the engine core's main thread taking
the request off the input queue.
The probe adds about 0.1 ms per request; compare arms measured the same way.

    .venv/bin/python benchmarks/front_end_phases.py [--arms empty,on] [--with detok_tail=on --with held_prompt=on]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PROBE_DIR = REPO / "benchmarks" / "front_end_phases"
PHASES = [
    ("render", "arrival", "rendered"),
    ("to add", "rendered", "api_add"),
    ("add", "api_add", "send0"),
    ("send", "send0", "send1"),
    ("wire", "send1", "core_pre0"),
    ("preprocess", "core_pre0", "core_pre1"),
    ("to queue", "core_pre1", "queued"),
    ("first out", "core_upd0", "core_upd1"),
    ("back", "core_upd1", "api_out"),
]


def _read(folder: Path) -> tuple[list[list[str]], list[list[str]]]:
    """(API server events, engine core events): the logs holding `arrival` and `queued` events."""
    api = core = None
    for path in folder.glob("*.log"):
        lines = [line.split() for line in path.read_text().splitlines() if line.strip()]
        events = {p[0] for p in lines}
        if "arrival" in events:
            api = lines
        elif "queued" in events:
            core = lines
    if api is None or core is None:
        raise SystemExit(f"{folder}: no API server or engine core events (was the probe loaded?)")
    return api, core


def _gc_ms(lines: list[list[str]], lo: float, hi: float) -> float:
    total, start = 0.0, None
    for p in lines:
        t = float(p[1])
        if not lo <= t < hi:
            continue
        if p[0] == "gc_start":
            start = t
        elif p[0] == "gc_stop" and start is not None:
            total += t - start
            start = None
    return 1000 * total


def analyze(folder: Path, turns: list[int]) -> dict[str, Any]:
    api, core = _read(folder)
    requests: list[dict[str, float]] = []
    for p in api:
        if p[0] == "arrival":
            requests.append({})
        if requests:
            requests[-1].setdefault(p[0], float(p[1]))
    if len(requests) != len(turns):
        raise SystemExit(f"{folder}: {len(requests)} requests logged, the draw has {len(turns)}")
    core_events = [(p[0], float(p[1]), p) for p in core if not p[0].startswith("gc_")]
    rows: list[dict[str, float]] = []
    for i, (r, turn) in enumerate(zip(requests, turns, strict=True)):
        if turn == 1:
            continue
        end = requests[i + 1]["arrival"] if i + 1 < len(requests) else float("inf")
        window = [(e, t, p) for e, t, p in core_events if r["send0"] <= t < end]
        at = dict(r)
        for name in ("core_pre0", "core_pre1", "queued"):
            at[name] = next(t for e, t, _ in window if e == name)
        at["core_upd0"] = max(t for e, t, _ in window if e == "core_upd0" and t < r["api_out"])
        at["core_upd1"] = max(t for e, t, _ in window if e == "core_upd1" and t < r["api_out"])
        row = {name: 1000 * (at[b] - at[a]) for name, a, b in PHASES}
        wake = [t for e, t, _ in window if e == "handle0" and at["core_pre1"] <= t <= at["queued"]]
        if wake:  # the engine core's main thread taking the request from the input queue
            row["to queue: wake"] = 1000 * (wake[0] - at["core_pre1"])
        row["front end"] = 1000 * ((at["queued"] - at["arrival"]) + (at["api_out"] - at["core_upd1"]))
        row["gc, API server"] = _gc_ms(api, r["arrival"], r["api_out"])
        row["gc, engine core"] = _gc_ms(core, r["send0"], r["api_out"])
        started: dict[tuple[str, str], float] = {}
        for e, t, p in window:
            if e.endswith("0"):
                started[(e[:-1], p[2])] = t
            elif e.endswith("1") and (e[:-1], p[2]) in started:
                key = f"in {e[:-1]}"
                row[key] = row.get(key, 0) + 1000 * (t - started.pop((e[:-1], p[2])))
            if len(p) >= 5 and p[-2] == "faults":
                key = f"faults in {e[:-1]}"
                row[key] = row.get(key, 0) + int(p[-1])
        rows.append(row)
    keys = list(rows[0]) + sorted({k for r in rows for k in r} - set(rows[0]))
    return {
        "warm_requests": len(rows),
        "mean": {k: statistics.mean(r.get(k, 0) for r in rows) for k in keys},
        "median": {k: statistics.median(r.get(k, 0) for r in rows) for k in keys},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", default="empty,on", help="profile_region_cache_engine.py arms, in order")
    parser.add_argument(
        "--with",
        dest="knobs",
        action="append",
        default=None,
        metavar="KNOB=VALUE",
        help="knobs of the `on` arm (default: detok_tail=on, held_prompt=on)",
    )
    parser.add_argument("--workload", default="w01-full")
    parser.add_argument("--keep", type=Path, help="keep the probe logs under this folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    knobs = args.knobs if args.knobs is not None else ["detok_tail=on", "held_prompt=on"]
    sys.path.insert(0, str(REPO))
    from frank.workloads.catalog import resolve_workload

    draw = Path(resolve_workload(args.workload)) / "draw-1.jsonl"
    turns = [json.loads(line)["turn"] for line in draw.read_text().splitlines() if line.strip()]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="frank-phases-") as tmp:
        root = args.keep or Path(tmp)
        for k, arm in enumerate(args.arms.split(",")):
            folder = root / f"{k + 1}-{arm}"
            env = dict(os.environ, FRANK_FRONT_END_PHASES=str(folder))
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROBE_DIR), env.get("PYTHONPATH", "")) if p)
            cmd = [
                sys.executable,
                str(REPO / "benchmarks" / "profile_region_cache_engine.py"),
                "--rate",
                "0",
                "--arm",
                arm,
                "--workload",
                args.workload,
                "--draws",
                "draw-1",
            ]
            for knob in knobs if arm == "on" else []:
                cmd += ["--with", knob]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-3000:])
                return proc.returncode
            results[f"{k + 1}-{arm}"] = {"profile": proc.stdout.splitlines()[0], **analyze(folder, turns)}
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    names = list(results)
    for name in names:
        print(f"{name}: {results[name]['profile']}")
    print(f"\nms per warm request ({results[names[0]]['warm_requests']} of them), mean / median")
    keys = list(dict.fromkeys(k for n in names for k in results[n]["mean"]))
    print(f"  {'phase':18}" + "".join(f"{n:>22}" for n in names))
    for key in keys:
        cells = "".join(
            f"{results[n]['mean'].get(key, 0):>13.2f} / {results[n]['median'].get(key, 0):<6.2f}" for n in names
        )
        print(f"  {key:18}{cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
