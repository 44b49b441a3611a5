"""Where the front end's time goes, per request, on the embedded engine at full W01 scale (py-spy).

Starts its own engine (default embedded-cpu-swa) with the region cache `--arm on|off` (or `empty`: the same
requests with the system message emptied, so every big region is empty: the floor that the renderer and the
hand-offs alone cost), replays the chosen draws in engine mode (one output token, one request at a time),
and samples the API server and the engine core with py-spy the whole time. Samples are binned by the
innermost frame that names a step:

  render           the chat template (render_messages / apply_hf_chat_template / jinja)
  cache lookup     the region cache's split, hashing, lookup and join (engine/region_cache/core.py)
  first encodes    regions the cache had not seen, encoded by the tokenizer (encode_regions)
  tokenize (vLLM)  vLLM's own tokenizer call (cache off, or a prompt the cache sent back to it)
  checks           request/prompt checks and process_for_engine (the renderer and the input processor)
  hand-off         the engine client's encode and send, the engine core's receive, decode and Request
                   construction (block hashes), scheduling
  request parse    pydantic parsing of the body (before vLLM's arrival time: not in TTFT - queue - prefill)
  response         building and streaming the answer (after the first token: not in the measure)
  other            the rest (event loop, metrics, ...)

and reported as milliseconds of CPU per request next to the measured front end (TTFT - queue - prefill from
/metrics). py-spy must be installed in the engine venv (`.venv-engine/bin/pip install py-spy`).

    .venv/bin/python benchmarks/profile_region_cache_engine.py --arm on [--draws draw-1] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import paths  # noqa: E402
from engine.controller import EngineController  # noqa: E402
from replays.runner import ReplayOptions, start_replay  # noqa: E402
from replays.workload import load_workload, resolve_workload, write_workload  # noqa: E402

# (step, substrings of a frame "function (file:line)"); the innermost frame that matches any decides.
STEPS: list[tuple[str, tuple[str, ...]]] = [
    ("first encodes", ("encode_regions (",)),
    ("cache lookup", ("region_cache/core.py",)),
    ("tokenize (vLLM)", ("_tokenize_prompt (", "tokenization_utils", "transformers/tokenization")),
    ("render", ("render_messages", "apply_hf_chat_template", "apply_chat_template", "jinja2")),
    ("checks", ("process_for_engine", "input_processor.py", "_validate", "validate_token_ids")),
    ("hand-off", ("core_client.py", "msgspec", "serial_utils.py", "zmq", "v1/request.py", "kv_cache_utils.py",
                  "preprocess_add_request", "_handle_client_request", "process_input_sockets",
                  "scheduler.py", "async_llm.py")),
    ("request parse", ("pydantic", "model_validate", "protocol.py")),
    ("response", ("chat_completion_stream_generator", "detokenizer", "output_processor.py")),
]
PROCESS_NAMES = ("api server", "engine core")


def classify(stack: str) -> str:
    frames = stack.split(";")
    for frame in reversed(frames):
        for step, marks in STEPS:
            if any(m in frame for m in marks):
                return step
    return "other"


def read_raw(path: Path) -> Counter[str]:
    bins: Counter[str] = Counter()
    if not path.exists():
        return bins
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            bins[classify(stack)] += int(count)
    return bins


def _emptied_workload(src: Path, draws: list[str], out: Path) -> Path:
    """A copy of the draws with every system message emptied (the `empty` arm)."""
    workload = load_workload(src, draws=draws)

    def records(draw: str):
        for r in workload.requests[draw]:
            body = dict(r.body)
            body["messages"] = [dict(m, content="") if m.get("role") == "system" else m for m in body["messages"]]
            yield {"id": r.id, "task": r.task, "episode": r.episode, "turn": r.turn, "offset_s": r.offset_s,
                   "body": body}

    return write_workload(out, "w01-emptied", "W01 with empty system messages", ((d, records(d)) for d in draws),
                          {"from": str(src)}, overwrite=True)


def _engine_core_pid(server_pid: int) -> int | None:
    import psutil

    for child in psutil.Process(server_pid).children(recursive=True):
        if "EngineCore" in " ".join(child.cmdline()) or "EngineCore" in child.name():
            return child.pid
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", choices=("on", "off", "empty"), default="on")
    parser.add_argument("--profile", default="embedded-cpu-swa")
    parser.add_argument("--workload", default="w01-full")
    parser.add_argument("--draws", nargs="+", default=["draw-1"])
    parser.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    parser.add_argument("--keep", type=Path, default=None, help="copy the raw py-spy stacks into this folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    py_spy = paths.engine_venv_python().parent / "py-spy"
    if not py_spy.exists():
        sys.exit(f"{py_spy} not found: .venv-engine/bin/pip install py-spy")
    tmp = Path(tempfile.mkdtemp(prefix="profile-rc-"))
    workload = resolve_workload(args.workload)
    if args.arm == "empty":
        workload = _emptied_workload(workload, args.draws, tmp / "workload")
    controller = EngineController(state_dir=tmp / "state")
    status = controller.start(args.profile, {"region_cache": "on" if args.arm == "on" else "off"})
    spies: list[subprocess.Popen[bytes]] = []
    raws = {name: tmp / f"{name.replace(' ', '-')}.txt" for name in PROCESS_NAMES}
    try:
        pids = {"api server": status.pid, "engine core": _engine_core_pid(status.pid or 0)}
        for name, pid in pids.items():
            if pid:
                spies.append(subprocess.Popen([str(py_spy), "record", "-p", str(pid), "-r", str(args.rate),
                                               "-f", "raw", "-o", str(raws[name])],
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)  # py-spy attaches
        load = os.getloadavg()
        options = ReplayOptions(mode="engine", draws=tuple(args.draws))
        summary = start_replay(workload, status.url, options, out=tmp / "replay").run_sync()
    finally:
        for spy in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        for spy in spies:
            try:
                spy.wait(timeout=60)
            except subprocess.TimeoutExpired:
                spy.kill()
        controller.stop()
    requests = sum(d["requests"] for d in summary["draws"].values())
    front_end = sum(d["front_end_s"] for d in summary["draws"].values())
    per_process = {name: read_raw(path) for name, path in raws.items()}
    steps = [s for s, _ in STEPS] + ["other"]
    result: dict[str, Any] = {
        "arm": args.arm, "profile": args.profile, "draws": args.draws, "requests": requests,
        "load_avg": load, "front_end_s": front_end, "front_end_ms_per_request": 1000 * front_end / requests,
        "cpu_ms_per_request": {name: {s: round(1000 * bins[s] / args.rate / requests, 2) for s in steps}
                               for name, bins in per_process.items()},
        "samples": {name: sum(bins.values()) for name, bins in per_process.items()},
    }
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        for name, path in raws.items():
            if path.exists():
                shutil.copy(path, args.keep / f"{args.arm}-{path.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"arm {args.arm} on {args.profile}, {requests} requests, load average {load[0]:.1f}: front end "
          f"(TTFT - queue - prefill) {result['front_end_ms_per_request']:.1f} ms per request")
    print(f"  {'CPU ms per request':20} " + " ".join(f"{n:>12}" for n in PROCESS_NAMES))
    for s in steps:
        print(f"  {s:20} " + " ".join(f"{result['cpu_ms_per_request'][n][s]:12.2f}" for n in PROCESS_NAMES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
