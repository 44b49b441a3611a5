"""Where the front end's time goes, per request, on the embedded engine at full W01 scale (py-spy).

Starts its own engine (default embedded-cpu-swa) with the region cache `--arm on|off` (or `empty`: the same
requests with the system message emptied, so every big region is empty: the floor that the renderer and the
hand-offs alone cost), replays the chosen draws in engine mode (one output token, one request at a time),
and samples the API server and the engine core with py-spy the whole time. Samples are binned by the
innermost frame that names a step:

  render           the chat template (render_messages / apply_hf_chat_template / jinja)
  cache lookup     the region cache's split, hashing, lookup and join (frank/plugins/region_cache/core.py)
  first encodes    regions the cache had not seen, encoded by the tokenizer (encode_regions)
  tokenize (vLLM)  vLLM's own tokenizer call (cache off, or a prompt the cache sent back to it)
  checks           request/prompt checks and process_for_engine (the renderer and the input processor,
                   e.g. validate_token_ids: max and min over the prompt's IDs)
  hand-off         the engine client's encode and send, the detokenizer's set-up, the engine core's
                   receive, decode and Request construction (block hashes)
  response         the answer after the first token (detokenizing, streaming): not in the measure
  request parse    the request body's parsing, before vLLM's arrival time: not in the measure
  engine step      scheduling and the model step (prefill is not in the measure)
  other            the rest (event loop, /metrics scrapes between requests, ...)

and reported as milliseconds per request next to the measured front end (TTFT - queue - prefill from
/metrics). "Busy" is the wall time a thread spent in a step, not waiting: on a loaded machine it includes
waiting for a core, and py-spy itself takes CPU, so the figures are proportions first. Waits are recognized
by their leaf frame (py-spy's own idle test misses waits inside C calls here). py-spy must be installed in
the engine venv (`.venv-uv/bin/uv pip install --python .venv-engine py-spy`).

    .venv/bin/python benchmarks/profile_region_cache_engine.py --arm on [--draws draw-1] [--json]
        [--with detok_tail=on --with block_hash_memo=on]   # the front-end parts too (docs/front-end-parts.md)
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

from frank import paths  # noqa: E402
from frank.engine.controller import EngineController  # noqa: E402
from frank.workloads.catalog import resolve_workload  # noqa: E402
from frank.workloads.format import load_workload, write_workload  # noqa: E402
from frank.workloads.replay import ReplayOptions, start_replay  # noqa: E402

# (step, substrings of a frame "function (file:line)"); the innermost frame that matches any decides.
STEPS: list[tuple[str, tuple[str, ...]]] = [
    ("first encodes", ("encode_regions (", "_fast_batch_encoder")),
    ("cache lookup", ("region_cache/core.py",)),
    ("tokenize (vLLM)", ("_tokenize_prompt (", "tokenization_utils", "transformers/tokenization")),
    ("render", ("render_messages", "apply_hf_chat_template", "apply_chat_template", "jinja2")),
    ("checks", ("process_for_engine", "input_processor.py", "_validate", "validate_token_ids")),
    (
        "hand-off",
        (
            "core_client.py",
            "msgspec",
            "serial_utils.py",
            "v1/request.py",
            "kv_cache_utils.py",
            "preprocess_add_request",
            "_handle_client_request",
            "process_input_sockets",
            "FastIncrementalDetokenizer.__init__",
            "add_request",
        ),
    ),
    ("response", ("chat_completion_stream_generator", "detokenizer", "output_processor.py")),
    ("request parse", ("pydantic", "model_validate", "protocol.py", "Request.json")),
    ("engine step", ("scheduler.py", "EngineCore.step", "multiproc_executor.py")),
]
STEP_NAMES = [s for s, _ in STEPS] + ["other"]
# Leaf frames of a thread that waits (py-spy's own idle detection misses waits inside C calls here).
IDLE_LEAVES = (
    "wait",
    "select",
    "poll",
    "get",
    "_worker",
    "sched_yield",
    "run",
    "acquire_read",
    "sleep",
    "_wait_for_tstate_lock",
    "recv",
    "recv_multipart",
)
PROCESS_NAMES = ("api server", "engine core")


def classify(stack: str) -> str:
    for frame in reversed(stack.split(";")):
        for step, marks in STEPS:
            if any(m in frame for m in marks):
                return step
    return "other"


def _idle(leaf: str) -> bool:
    name = leaf.split(" (")[0].rsplit(".", 1)[-1]
    return name in IDLE_LEAVES


def read_raw(path: Path) -> tuple[Counter[str], int]:
    """(busy samples per step, ticks). Recorded with --threads --idle: every thread's stack at every tick,
    rooted at a "thread (0x...)" frame, so the busiest-sampled thread's total is the number of ticks."""
    bins: Counter[str] = Counter()
    per_thread: Counter[str] = Counter()
    if not path.exists():
        return bins, 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        per_thread[frames[0]] += int(count)
        if len(frames) > 1 and not _idle(frames[-1]):
            bins[classify(stack)] += int(count)
    return bins, max(per_thread.values(), default=0)


def _emptied_workload(src: Path, draws: list[str], out: Path) -> Path:
    """A copy of the draws with every system message emptied (the `empty` arm)."""
    workload = load_workload(src, draws=draws)

    def records(draw: str):
        for r in workload.requests[draw]:
            body = dict(r.body)
            body["messages"] = [dict(m, content="") if m.get("role") == "system" else m for m in body["messages"]]
            yield {
                "id": r.id,
                "task": r.task,
                "episode": r.episode,
                "turn": r.turn,
                "offset_s": r.offset_s,
                "body": body,
            }

    return write_workload(
        out,
        "w01-emptied",
        "W01 with empty system messages",
        ((d, records(d)) for d in draws),
        {"from": str(src)},
        overwrite=True,
    )


def _engine_core_pid(server_pid: int) -> int | None:
    import psutil

    for child in psutil.Process(server_pid).children(recursive=True):
        if "EngineCore" in " ".join(child.cmdline()) or "EngineCore" in child.name():
            return child.pid
    return None


def _part_counters(url: str, token: str, knobs: dict[str, str]) -> dict[str, Any]:
    """The counters of the front-end parts switched on (so a figure says the part did act), read before
    the engine stops."""
    from frank.engine.parts_client import PartsClient
    from frank.plugins.front_end.catalog import PARTS

    out: dict[str, Any] = {}
    for part in PARTS.values():
        if knobs.get(part.knob) == "on":
            try:
                out[part.name] = PartsClient(url, token).part(part.name)
            except Exception as exc:  # a figure without its counters still prints, saying why
                out[part.name] = {"error": str(exc)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", choices=("on", "off", "empty"), default="on")
    parser.add_argument("--profile", default="embedded-cpu-swa")
    parser.add_argument("--workload", default="w01-full")
    parser.add_argument("--draws", nargs="+", default=["draw-1"])
    parser.add_argument(
        "--rate", type=int, default=500, help="py-spy samples per second (0: no py-spy, the front end alone)"
    )
    parser.add_argument("--keep", type=Path, default=None, help="copy the raw py-spy stacks into this folder")
    parser.add_argument(
        "--with",
        dest="knobs",
        action="append",
        default=[],
        metavar="KNOB=VALUE",
        help="another knob at start, e.g. --with detok_tail=on --with block_hash_memo=on (repeatable)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    knobs = {"region_cache": "on" if args.arm == "on" else "off"}
    for item in args.knobs:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            parser.error(f"--with {item!r}: expected KNOB=VALUE")
        knobs[name] = value

    py_spy = paths.engine_venv_python().parent / "py-spy"
    if args.rate and not py_spy.exists():
        sys.exit(f"{py_spy} not found: .venv-uv/bin/uv pip install --python .venv-engine py-spy")
    tmp = Path(tempfile.mkdtemp(prefix="profile-rc-"))
    workload = resolve_workload(args.workload)
    if args.arm == "empty":
        workload = _emptied_workload(workload, args.draws, tmp / "workload")
    controller = EngineController(state_dir=tmp / "state")
    status = controller.start(args.profile, knobs)
    spies: list[subprocess.Popen[bytes]] = []
    raws = {name: tmp / f"{name.replace(' ', '-')}.txt" for name in PROCESS_NAMES}
    try:
        pids = {"api server": status.pid, "engine core": _engine_core_pid(status.pid or 0)}
        for name, pid in pids.items():
            if pid and args.rate:
                spies.append(
                    subprocess.Popen(
                        [
                            str(py_spy),
                            "record",
                            "-p",
                            str(pid),
                            "-r",
                            str(args.rate),
                            "--threads",
                            "--idle",
                            "--nonblocking",
                            "-f",
                            "raw",
                            "-o",
                            str(raws[name]),
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
        time.sleep(1.0)  # py-spy attaches
        load = os.getloadavg()
        options = ReplayOptions(mode="engine", draws=tuple(args.draws))
        t0 = time.monotonic()
        summary = start_replay(workload, status.url, options, out=tmp / "replay").run_sync()
        duration = time.monotonic() - t0
        parts = _part_counters(status.url or "", controller.token or "", knobs)
    finally:
        for spy in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        for spy in spies:
            try:
                spy.wait(timeout=60)
            except subprocess.TimeoutExpired:
                spy.kill()
        controller.stop()
    draws = summary.draws.values()
    requests = sum(d["requests"] for d in draws)
    cold = sum(d["cold_requests"] for d in draws)
    front_end = sum(d["front_end_s"] for d in draws)
    cold_s = sum(d["cold_front_end_s"] for d in draws)
    result: dict[str, Any] = {
        "arm": args.arm,
        "profile": args.profile,
        "knobs": knobs,
        "draws": args.draws,
        "requests": requests,
        "load_avg": load,
        "replay_s": round(duration, 1),
        "front_end_ms_per_request": 1000 * front_end / requests,
        "front_end_cold_ms_per_request": 1000 * cold_s / cold if cold else None,
        "front_end_warm_ms_per_request": 1000 * (front_end - cold_s) / (requests - cold),
        "cpu_ms_per_request": {},
        "ticks": {},
        "parts": parts,
    }
    for name, path in raws.items():
        bins, ticks = read_raw(path)
        tick_s = duration / ticks if ticks else 0.0  # py-spy falls behind its rate under load: use real ticks
        result["ticks"][name] = ticks
        result["cpu_ms_per_request"][name] = {s: round(1000 * bins[s] * tick_s / requests, 2) for s in STEP_NAMES}
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        for name, path in raws.items():  # noqa: B007
            if path.exists():
                shutil.copy(path, args.keep / f"{args.arm}-{path.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"arm {args.arm} on {args.profile} ({', '.join(f'{k}={v}' for k, v in knobs.items())}), "
        f"{requests} requests, load average {load[0]:.1f}: front end "
        f"(TTFT - queue - prefill) {result['front_end_ms_per_request']:.1f} ms per request (fresh "
        f"conversations {result['front_end_cold_ms_per_request'] or 0:.1f} ms, the rest "
        f"{result['front_end_warm_ms_per_request']:.1f} ms)"
    )
    for name, snap in parts.items():
        counts = {
            **snap.get("counts", {}),
            **{f"core.{k}": v for k, v in snap.get("engine_core", {}).get("counts", {}).items()},
        }
        print(f"  part {name}: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or str(snap)))
    print(f"  {'busy ms per request':20} " + " ".join(f"{n:>12}" for n in PROCESS_NAMES))
    for s in STEP_NAMES:
        print(f"  {s:20} " + " ".join(f"{result['cpu_ms_per_request'][n][s]:12.2f}" for n in PROCESS_NAMES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
