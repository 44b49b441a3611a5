"""vLLM against llama.cpp on SmolLM2, side by side in one run: time per draw, prompt and generation tokens
per second, TTFT, and the client overhead per request (client total - the engine's own prefill, decode and
queue time).

    .venv/bin/python benchmarks/bench_engines.py [--engines embedded-cpu-smollm2 llamacpp-cpu] [--json]
    .venv/bin/python benchmarks/bench_engines.py --engines llamacpp-cpu --workload w01-mini --mode engine
    .venv/bin/python benchmarks/bench_engines.py --run RUN_DIR     # the figures of a replay already recorded

W01 mini's prompts (11.6K-21.3K SmolLM2 tokens) do not fit vLLM's SmolLM2 profile (8192 tokens, the trained
context); llamacpp-cpu holds them (32768, YaRN), at about half an hour of prefill per draw on one thread
here. So the default draw is W01-shaped but short: two conversations of four turns each over a ~1.5K-token
repository region (from the fidelity code set), every turn adding a tool-result-like user message, replayed
in full mode (streamed, max 32 tokens). Each engine starts fresh in its own FRANK_HOME (a cold cache), runs
draw-1 once, and stops. On a shared machine the absolute figures are measured under load: compare the
columns, and read the load average printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from frank.workloads.format import write_workload  # noqa: E402
from frank.workloads.replay import read_records  # noqa: E402


def make_draw(path: Path) -> Path:
    texts = [json.loads(line)["text"] for line in (REPO / "frank/fidelity/sets/code/texts.jsonl").open()]
    region = "\n\n".join(texts)[:6000]
    records = []
    for ep in range(2):
        messages = [
            {"role": "system", "content": f"You are a coding agent. The repository:\n\n{region}"},
            {"role": "user", "content": f"Task {ep + 1}: find where the prefill time is recorded and explain it."},
        ]
        for turn in range(1, 5):
            records.append(
                {
                    "id": f"e{ep}-r{turn:02d}",
                    "task": f"t{ep}",
                    "episode": f"e{ep}",
                    "turn": turn,
                    "offset_s": 0.0,
                    "body": {"messages": list(messages), "max_tokens": 32, "temperature": 0},
                }
            )
            messages.append({"role": "assistant", "content": f"Looking at part {turn} of the region."})
            messages.append({"role": "user", "content": f"Tool output {turn}:\n{texts[turn][:800]}"})
    return write_workload(path, "w01-short", "W01-shaped draw that fits 8K", [("draw-1", records)], overwrite=True)


def frank(home: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "FRANK_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "frank.console.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


def mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def run_engine(profile: str, workload: Path | str, root: Path, mode: str = "full") -> dict:
    home = root / profile
    started = frank(home, "engine", "start", "--profile", profile, "--json")
    if started.returncode != 0:
        raise SystemExit(f"{profile}: start failed:\n{started.stderr[-2000:]}")
    ready_s = json.loads(started.stdout)["ready_s"]
    try:
        t0 = time.monotonic()
        out = frank(home, "replay", str(workload), "--draws", "draw-1", "--mode", mode, "--json", "--quiet",
                    timeout=7200)  # fmt: skip
        wall = time.monotonic() - t0
        summary = json.loads(out.stdout)
        records = read_records(Path(summary["run_dir"]) / "draw-1.jsonl")
    finally:
        frank(home, "engine", "stop")
    return {"profile": profile, "ready_s": ready_s, **summarize(records), "replay_wall_s": wall}


def summarize(records: list[dict]) -> dict:
    """A draw's figures from its replay records (client and server timings)."""
    ok = [r for r in records if r["status"] == "ok"]
    servers = [r["server"] for r in ok]
    computed = sum((s["prompt_tokens"] or 0) - (s["cached_tokens"] or 0) for s in servers)
    prefill = sum(s["prefill_s"] or 0.0 for s in servers)
    generated = sum(max((s["generation_tokens"] or 0) - 1, 0) for s in servers)
    decode = sum(s["decode_s"] or 0.0 for s in servers)
    overhead = [
        r["client"]["total_s"] - (r["server"]["prefill_s"] or 0) - (r["server"]["decode_s"] or 0)
        - (r["server"]["queue_s"] or 0)
        for r in ok
    ]  # fmt: skip
    return {
        "requests": len(records),
        "ok": len(ok),
        "draw_client_s": sum(r["client"]["total_s"] for r in ok),
        "computed_prompt_tokens": computed,
        "prompt_tokens_per_s": computed / prefill if prefill else None,
        "generation_tokens_per_s": generated / decode if decode else None,
        "mean_ttft_s": mean([r["client"]["ttft_s"] for r in ok]),
        "mean_client_overhead_s": mean(overhead),
        "sources": sorted({v for s in servers for v in s["sources"].values()}),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=["embedded-cpu-smollm2", "llamacpp-cpu"])
    parser.add_argument("--workload", help="a workload (w01-mini, a folder; default: the short W01-shaped draw)")
    parser.add_argument("--mode", choices=["engine", "full"], default="full", help="the replay's mode")
    parser.add_argument("--run", type=Path, help="only summarize this recorded replay run folder's draw-1")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()
    if args.run:
        meta = json.loads((args.run / "run.json").read_text())
        profile = (meta.get("engine") or {}).get("profile") or args.run.name
        results = [{"profile": profile, **summarize(read_records(args.run / "draw-1.jsonl"))}]
    else:
        with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
            workload = args.workload or make_draw(Path(tmp) / "w01-short")
            results = [run_engine(profile, workload, Path(tmp), args.mode) for profile in args.engines]
    if args.json:
        print(json.dumps({"load_average": load, "engines": results}, indent=2))
        return 0
    print(f"load average at start: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (2 cores): figures measured under load")
    rows = [k for k in results[0] if k not in ("profile", "sources")]
    print(f"{'':<26}" + "".join(f"{r['profile']:>24}" for r in results))
    for key in rows:
        cells = "".join(f"{'-' if r[key] is None else (f'{r[key]:.3f}' if isinstance(r[key], float) else r[key]):>24}"
                        for r in results)  # fmt: skip
        print(f"{key:<26}{cells}")
    for r in results:
        print(f"{r['profile']}: per-request values from {', '.join(r['sources'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
