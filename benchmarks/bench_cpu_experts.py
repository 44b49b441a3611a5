"""The CPU-expert table: time per verify step, the CPU-expert decode wait and tokens/s of a MoE profile, with
none, a third and all of its experts on the CPU (llama.cpp: the experts of 0, a third and all of its layers,
`cpu_moe_layers`; exllamav3: 0, a third and all of every layer's routed experts, `cpu_split`), for both
CPU-expert schedules and each thread count, every configuration a fresh engine start through frank and a
frank replay of one short draw (full mode: streamed, DSpark drafts verified, `ignore_eos` so every request
decodes --max-tokens).

    .venv/bin/python benchmarks/bench_cpu_experts.py --profile llamacpp-gpu-moe --threads 4 8 16 --json OUT
    .venv/bin/python benchmarks/bench_cpu_experts.py --profile exl3-gpu-moe --threads 8 16 --json OUT
    .venv/bin/python benchmarks/bench_cpu_experts.py --profile llamacpp-cpu-moe        # mechanics only, here

The cross-check of the wait (docs/measures.md): per schedule and thread count, the step time with N layers'
experts on the CPU less the step time with none (`step_minus_0_ms`) against the wait with N less the wait
with none (`wait_minus_0_ms`): the wait counts the pool's compute, the step difference also the hand-offs
(copies to and from the GPU, waking the pool), so their ratio (`wait_share_of_step_diff`) is at most about
1. On a CPU-only engine every op is on the CPU whatever --n-cpu-moe says: there the rows differ by noise.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from frank.engine.exl3 import prof_log  # noqa: E402
from frank.engine.profiles import load_profile  # noqa: E402
from frank.workloads.format import write_workload  # noqa: E402
from frank.workloads.replay import read_records  # noqa: E402


def make_draw(path: Path, requests: int, max_tokens: int) -> Path:
    """`requests` one-turn conversations, each its own prompt (about 300 tokens): decode-bound."""
    records = []
    for i in range(requests):
        messages = [
            {"role": "system", "content": "You are a coding agent working in a repository. " * 12},
            {"role": "user", "content": f"Task {i + 1}: explain how the scheduler batches verify steps."},
        ]
        body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
        records.append({"id": f"r{i:02d}", "task": f"t{i}", "episode": f"e{i}", "turn": 1, "offset_s": 0.0,
                        "body": body})  # fmt: skip
    return write_workload(path, "cpu-experts", "decode-bound draw", [("draw-1", records)], overwrite=True)


def frank(home: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "FRANK_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "frank.console.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


def run_config(home: Path, profile: str, knobs: dict[str, object], draw: Path, max_tokens: int) -> dict:
    flags = [a for k, v in knobs.items() for a in ("--knob", f"{k}={v}")]
    started = frank(home, "engine", "start", "--profile", profile, *flags, "--json")
    if started.returncode != 0:
        return {**knobs, "error": started.stderr.strip()[-400:]}
    notes = json.loads(started.stdout).get("notes", [])
    memory = {"at_ready": gpu_memory_used_mib()}
    try:
        out = frank(home, "replay", str(draw), "--mode", "full", "--max-tokens", str(max_tokens), "--json", "--quiet")
        log = frank(home, "engine", "logs", "-n", "5000").stdout
        memory["after_replay"] = gpu_memory_used_mib()
    finally:
        frank(home, "engine", "stop", "--json")
    if out.returncode != 0:
        return {**knobs, "error": out.stderr.strip()[-400:]}
    summary = json.loads(out.stdout)
    totals = summary["draws"]["draw-1"]
    servers = [r["server"] for r in read_records(Path(summary["run_dir"]) / "draw-1.jsonl") if r.get("server")]
    generated = sum(s.get("generation_tokens") or 0 for s in servers)
    decode = sum(s.get("decode_s") or 0 for s in servers)
    ms = lambda v: None if v is None else round(1000 * v, 3)  # noqa: E731
    return {
        **knobs,
        "ok": totals["ok"],
        "decode_steps": totals["decode_steps"],
        "drafted_steps": totals["drafted_steps"],
        "acceptance_length": totals["acceptance_length"],
        "verify_step_ms": ms(totals["verify_step_s"]),
        "cpu_expert_wait_ms": ms(totals["cpu_expert_wait_step_s"]),
        "cpu_expert_wait_s": totals["cpu_expert_wait_s"],
        "tokens_per_s": round(generated / decode, 1) if decode else None,
        "notes": notes,  # the thread count "auto" resolved to, a count that starves the host
        "gpu_memory_used_mib": memory,  # NVML's, through nvidia-smi: the split's resident memory (the fit's check)
        "exl3_prof": exl3_prof(log),
        "run_dir": summary["run_dir"],
    }


def gpu_memory_used_mib() -> list[int] | None:
    """Every GPU's used memory now (MiB), None without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return None
    query = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"]
    done = subprocess.run(query, capture_output=True, text=True, timeout=30)
    return [int(v) for v in done.stdout.split()] if done.returncode == 0 else None


def exl3_prof(log: str) -> dict | None:
    """exllamav3's own figures from the start's log (EXL3_MOE_CPU_PROF, EXL3_SPLIT_PROF), beside frank's wait:
    the pool's compute per job and the GPU stream's stall at collect; None for another engine."""
    prof = prof_log.parse(log)
    if not prof.pool and not prof.split:
        return None
    wait = [s for s in prof.split if s.kind == "wait"]
    return {
        "pool_jobs": prof.pool[-1].jobs if prof.pool else None,
        "pool_us_per_job": round(sum(prof.pool[-1].us_per_job.values()), 2) if prof.pool else None,
        "stall_median_ms": wait[-1].median_ms if wait else None,
        "stall_p90_ms": wait[-1].p90_ms if wait else None,
    }


SHARE_KNOBS = ("cpu_moe_layers", "cpu_split")  # how much of the experts the CPU computes: llama.cpp, exllamav3


def share_knob(knobs: dict) -> str:
    return next(k for k in SHARE_KNOBS if k in knobs)


def cross_check(rows: list[dict], share: str) -> None:
    """Add, to each row with experts on the CPU, its differences against the same schedule and threads at 0."""
    # none on the CPU: the pool idles, so one row a schedule stands for every thread count
    base = {r["cpu_experts_sched"]: r for r in rows if r[share] == 0 and "error" not in r}
    for r in rows:
        b = base.get(r["cpu_experts_sched"])
        if b is None or "error" in r or r[share] == 0 or r["verify_step_ms"] is None:
            continue
        r["step_minus_0_ms"] = round(r["verify_step_ms"] - b["verify_step_ms"], 3)
        if r["cpu_expert_wait_ms"] is not None and b["cpu_expert_wait_ms"] is not None:
            r["wait_minus_0_ms"] = round(r["cpu_expert_wait_ms"] - b["cpu_expert_wait_ms"], 3)
            if r["step_minus_0_ms"] > 0:
                r["wait_share_of_step_diff"] = round(r["wait_minus_0_ms"] / r["step_minus_0_ms"], 3)


def table(rows: list[dict], share: str) -> str:
    cols = (share, "cpu_experts_sched", "cpu_threads", "verify_step_ms", "cpu_expert_wait_ms",
            "tokens_per_s", "step_minus_0_ms", "wait_minus_0_ms", "wait_share_of_step_diff",
            "acceptance_length", "pool_us_per_job", "stall_median_ms")  # fmt: skip
    out = [" | ".join(cols), " | ".join("---" for _ in cols)]
    for r in rows:
        r = {**r, **(r.get("exl3_prof") or {})}
        out.append(" | ".join("error: " + r["error"][:60] if c == "verify_step_ms" and "error" in r
                              else str(r.get(c, "")) for c in cols))  # fmt: skip
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", default="llamacpp-cpu-moe")
    p.add_argument("--layers", type=int, nargs="+", help="cpu_moe_layers / cpu_split values (default: the profile's)")
    p.add_argument("--scheds", type=int, nargs="+", default=[1, 2])
    p.add_argument("--threads", nargs="+", help="cpu_threads values, numbers or auto (default: the profile's)")
    p.add_argument("--requests", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args(argv)
    prof = load_profile(args.profile)
    share = share_knob(prof.knobs)
    layers = args.layers or list(prof.knobs[share].values)
    threads = args.threads or list(prof.knobs["cpu_threads"].values)
    work = Path(tempfile.mkdtemp(prefix="bench-cpu-experts-"))
    draw = make_draw(work / "draw", args.requests, args.max_tokens)
    # the engines run under a home of their own: a profile from the caller's home goes with them
    if REPO not in prof.source.resolve().parents:
        own = work / "home" / "config" / "profiles"
        own.mkdir(parents=True)
        shutil.copy(prof.source, own / prof.source.name)
    rows = []
    started = time.monotonic()
    product = itertools.product(layers, args.scheds, threads)
    configs = [(n, sched, t) for n, sched, t in product if n != 0 or t == threads[0]]  # none: one thread count
    for n, sched, t in configs:
        knobs = {share: n, "cpu_experts_sched": sched, "cpu_threads": t}
        row = run_config(work / "home", args.profile, knobs, draw, args.max_tokens)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    cross_check(rows, share)
    print(f"{args.profile}: {args.requests} requests x {args.max_tokens} tokens per configuration, "
          f"{time.monotonic() - started:.0f} s in all, load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(table(rows, share))
    if args.json:
        args.json.write_text(json.dumps({"profile": args.profile, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
