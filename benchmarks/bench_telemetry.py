"""What the telemetry costs: one sample, and the sampler's CPU use next to a peer watching the same engine.

    .venv/bin/python benchmarks/bench_telemetry.py [--url URL --pid PID] [--seconds 90] [--samples 200]
                                                   [--peer PATH_TO_vllm-htop] [--json]

Without --url it watches frank's running engine, or starts the embedded-cpu engine in a temp FRANK_HOME
(FRANK_MODELS must hold tiny-frank) and stops it at the end.

1. Per-sample cost: `Sampler.sample_once()` N times against the running engine: the whole sample and its
   parts (psutil, NVML per GPU, /metrics GET + parse). Targets: NVML part < 1 ms per GPU, whole < 10 ms.
2. CPU use at a 1 s period, side by side in the same run: `frank telemetry --period 1` (the real CLI loop,
   printing a line a second), the peer `vllm-htop --interval 1 --output json` (continuous, headless) and
   `vllm-htop --once --output json` run once a second, all watching the same engine while this script sends it a short chat request every few seconds. Each
   process's CPU time (user+sys, psutil) is read after a warm-up and again `--seconds` later. Target: ours
   < 1 % of one core. The ratio ours/peer is printed.
The peer is installed into a throwaway venv (.build/peer-venv) from PyPI if --peer is not given.
"""  # noqa: E501

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from frank.engine import metrics as m  # noqa: E402
from frank.telemetry.sampler import Sampler, static_target  # noqa: E402

PEER_VENV = REPO / ".build" / "peer-venv"


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]


def ms(values: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(values) * 1e3, 3),
        "p95_ms": round(pct(values, 0.95) * 1e3, 3),
        "max_ms": round(max(values) * 1e3, 3),
    }


def ensure_peer(path: str | None) -> Path:
    if path:
        return Path(path)
    exe = PEER_VENV / "bin" / "vllm-htop"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
        subprocess.run([str(PEER_VENV / "bin" / "pip"), "install", "-q", "vllm-htop"], check=True)
    return exe


class Engine:
    """The engine to watch: given, frank's running one, or one started here (and stopped at the end)."""

    def __init__(self, url: str | None, pid: int | None) -> None:
        self.controller = None
        self.home: str | None = None
        if url:
            self.url, self.pid = url, pid
            return
        from frank.engine.controller import EngineController

        st = EngineController().status()
        if st.state == "ready":
            self.url, self.pid = st.url, st.pid
            return
        self.home = tempfile.mkdtemp(prefix="frank-bench-telemetry-")
        os.environ["FRANK_HOME"] = self.home
        os.environ.setdefault("FRANK_MODELS", str(REPO / ".build" / "models"))
        self.controller = EngineController()
        print("starting the embedded engine (about a minute)...", file=sys.stderr)
        st = self.controller.start("embedded-cpu")
        self.url, self.pid = st.url, st.pid

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()


def chat(client: httpx.Client, url: str, max_tokens: int = 16) -> None:
    client.post(
        url + "/v1/chat/completions",
        json={
            "model": "tiny-frank",
            "max_tokens": max_tokens,
            "temperature": 0,
            "ignore_eos": True,
            "messages": [{"role": "user", "content": "Watch the GPU, the PCIe link and the expert pool. " * 8}],
        },
    )


def sample_cost(url: str, pid: int | None, n: int) -> dict[str, object]:
    sampler = Sampler(static_target(url, pid, model_name="tiny-frank"), period_s=1.0)
    snaps, cpu_s = [], []
    with httpx.Client(timeout=120) as client:
        chat(client, url)  # something in the counters
        for _i in range(n):
            t0 = time.thread_time()
            snaps.append(sampler.sample_once())
            cpu_s.append(time.thread_time() - t0)
            time.sleep(0.02)
        text = client.get(url + "/metrics").text
        get_s: dict[str, list[float]] = {"identity": [], "gzip": []}
        encoding = {}
        for _ in range(20):
            for enc in get_s:
                t0 = time.perf_counter()
                r = client.get(url + "/metrics", headers={"Accept-Encoding": enc})
                get_s[enc].append(time.perf_counter() - t0)
                encoding[enc] = r.headers.get("content-encoding", "identity")
    sampler.stop()
    last = snaps[-1]
    ngpu = len(last.gpu.gpus)
    parse = []
    for _ in range(50):
        t0 = time.perf_counter()
        m.parse_metrics(text)
        parse.append(time.perf_counter() - t0)
    return {
        "samples": n,
        "engine_state": last.engine.state,
        "engine_threads": last.cpu.engine.num_threads if last.cpu.engine else None,
        "engine_processes": len(last.cpu.engine.pids) if last.cpu.engine else None,
        "whole_sample": ms([s.cost_s for s in snaps]),
        "whole_sample_cpu_time": ms(cpu_s),
        "cpu_part": ms([s.cost_cpu_s for s in snaps]),
        "metrics_part": ms([s.cost_metrics_s for s in snaps]),
        "metrics_parse_only": ms(parse),
        "metrics_text_bytes": len(text),
        "metrics_get_wall_identity": ms(get_s["identity"]),
        "metrics_get_wall_gzip": ms(get_s["gzip"]),
        "server_encoding": encoding,
        "gpus": ngpu,
        "gpu_error": last.gpu.error,
        "nvml_part_per_gpu": ms([s.cost_gpu_s / ngpu for s in snaps]) if ngpu else None,
    }


def cpu_seconds(proc: psutil.Process) -> float:
    total = 0.0
    for p in [proc] + proc.children(recursive=True):
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


ONCE_LOOP = """
import resource, subprocess, sys, time
cmd, seconds = sys.argv[1:-1], float(sys.argv[-1])
due = time.monotonic()
end = due + seconds
while time.monotonic() < end:
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    due += 1.0
    time.sleep(max(0.0, due - time.monotonic()))
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime + r.ru_stime, flush=True)
"""


def side_by_side(url: str, pid: int | None, seconds: float, peer: Path, load_every: float) -> dict[str, object]:
    ours_cmd = [
        sys.executable,
        "-m",
        "frank.console.cli",
        "telemetry",
        "--period",
        "1",
        "--url",
        url,
        "--model",
        "tiny-frank",
        "--duration",
        str(seconds + 30),
    ]
    if pid:
        ours_cmd += ["--pid", str(pid)]
    peer_cmd = [str(peer), "--url", url, "--interval", "1", "--output", "json", "--no-gpu-detect"]
    procs = {
        "ours (frank telemetry --period 1)": subprocess.Popen(
            ours_cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ),
        "peer (vllm-htop --interval 1 --output json)": subprocess.Popen(
            peer_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ),
    }
    # the peer's one-shot mode in a loop at the same period: only its children's CPU is counted
    once = subprocess.Popen(
        [
            sys.executable,
            "-c",
            ONCE_LOOP,
            str(peer),
            "--url",
            url,
            "--once",
            "--output",
            "json",
            "--no-gpu-detect",
            str(seconds),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    stop = threading.Event()

    def load() -> None:
        with httpx.Client(timeout=120) as client:
            while not stop.wait(load_every):
                chat(client, url)

    loader = threading.Thread(target=load, daemon=True)
    try:
        time.sleep(8)  # past their imports and first polls
        for name, p in procs.items():
            if p.poll() is not None:
                raise SystemExit(f"{name} exited early with {p.returncode}: {p.args}")
        handles = {name: psutil.Process(p.pid) for name, p in procs.items()}
        loader.start()
        t0 = time.monotonic()
        start = {name: cpu_seconds(h) for name, h in handles.items()}
        time.sleep(seconds)
        wall = time.monotonic() - t0
        used = {name: cpu_seconds(h) - start[name] for name, h in handles.items()}
        once_cpu = float(once.communicate(timeout=seconds + 60)[0].strip())
    finally:
        stop.set()
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    used["peer (vllm-htop --once --output json, once a second)"] = once_cpu
    names = list(used)
    out: dict[str, object] = {"window_s": round(wall, 1), "load": f"one 16-token chat request every {load_every:g} s"}
    for name in names:
        out[name] = {"cpu_s": round(used[name], 3), "percent_of_one_core": round(100 * used[name] / wall, 3)}
    out["ratio_ours_over_peer_continuous"] = round(used[names[0]] / used[names[1]], 4) if used[names[1]] else None
    out["ratio_ours_over_peer_once_loop"] = round(used[names[0]] / once_cpu, 4) if once_cpu else None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url")
    ap.add_argument("--pid", type=int)
    ap.add_argument("--seconds", type=float, default=90.0, help="CPU measuring window (>= 60)")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--skip-cpu", action="store_true", help="only the per-sample cost")
    ap.add_argument("--peer", help="path to vllm-htop (default: install into .build/peer-venv)")
    ap.add_argument("--load-every", type=float, default=3.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    peer = ensure_peer(args.peer)
    engine = Engine(args.url, args.pid)
    try:
        cost = sample_cost(engine.url, engine.pid, args.samples)
        cpu = None if args.skip_cpu else side_by_side(engine.url, engine.pid, args.seconds, peer, args.load_every)
    finally:
        engine.stop()
    result = {"per_sample": cost, "cpu_use_at_1s": cpu, "host_cores": psutil.cpu_count()}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"per-sample cost over {cost['samples']} samples (engine {cost['engine_state']}, "
        f"{cost['engine_processes']} processes / {cost['engine_threads']} threads):"
    )
    for key in (
        "whole_sample",
        "whole_sample_cpu_time",
        "metrics_get_wall_identity",
        "metrics_get_wall_gzip",
        "cpu_part",
        "metrics_part",
        "metrics_parse_only",
        "nvml_part_per_gpu",
    ):
        v = cost[key]
        print(
            f"  {key:20s} "
            + (
                f"median {v['median_ms']:.3f} ms  p95 {v['p95_ms']:.3f} ms  max {v['max_ms']:.3f} ms"
                if v
                else f"- ({cost['gpu_error']})"
            )
        )
    print(f"  /metrics text {cost['metrics_text_bytes']} bytes; server content-encoding {cost['server_encoding']}")
    if cpu is None:
        return 0
    print(f"CPU use at a 1 s period over {cpu['window_s']} s ({cpu['load']}):")
    for name, v in cpu.items():
        if isinstance(v, dict):
            print(f"  {name:45s} {v['cpu_s']:7.3f} s CPU = {v['percent_of_one_core']:.3f} % of one core")
    print(f"  ratio ours / peer (continuous): {cpu['ratio_ours_over_peer_continuous']}")
    print(f"  ratio ours / peer (--once loop): {cpu['ratio_ours_over_peer_once_loop']}")
    print(
        "  note: vllm-htop 0.5.0's continuous mode never sleeps when stdin is not a TTY (its keyboard wait is"
        " skipped), so it spins; the --once loop pays an interpreter start per poll."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
