"""Console benchmark: prints measured figures (no pass/fail; the idle comparison prints its verdict).

1. Keypress to visible reaction while telemetry and a replay job update the screen: the real app (Pilot,
   headless) over the real engine, real sampler at 1 s, a W01-mini replay launched from the menu (a
   detached job the console follows at 1 Hz); each key switches the screen and we time until the new
   screen has been rendered.
2. Idle CPU, side by side in one window: `frank` in a real terminal (tmux, 120x36) idle on the dashboard
   with the engine ready, and the peer monitor vllm-htop (its TUI, 1 s interval) watching the same engine
   in its own tmux session, each process's CPU time from psutil over the same `--idle-s` seconds, after
   `--settle-s` seconds (70: start-up, and the 60-point sparklines filling, are not idle). Beside
   them: the telemetry sampler alone (same period) in its own process (the console's floor), and with
   `--baseline-src DIR` the console of another source tree (e.g. `git archive main`). Then the verdict:
   the console's figure against the peer's. The peer is installed into .build/peer-venv from PyPI unless
   `--peer PATH` names one; `--no-peer` leaves it out.
3. Where the console's idle CPU goes (`--breakdown`, after 2): the real app headless (Pilot) over the same
   engine for `--idle-s` seconds, every Textual timer callback and screen repaint timed in thread CPU:
   calls per second, ms each, share of a core.

Needs a running engine in FRANK_HOME's state dir (`frank engine start`), or pass --start to start one
(stopped again at the end). Usage: python benchmarks/bench_console.py [--start] [--idle-s 60] [--settle-s 70]
    [--keys 40]
    [--skip-keys] [--skip-idle] [--breakdown] [--peer PATH | --no-peer] [--baseline-src DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_telemetry import cpu_seconds, ensure_peer  # noqa: E402

CONSOLE = "console"
PEER_INTERVAL_S = 1.0
PEER = f"peer vllm-htop --interval {PEER_INTERVAL_S:g}"
SAMPLER = "telemetry sampler alone"

SAMPLER_ONLY = """
import sys, time
from frank.telemetry.sampler import Sampler, controller_target
s = Sampler(controller_target(), period_s=1.0).start()
time.sleep(float(sys.argv[1]))
s.stop()
"""


async def key_to_paint(app, sequence: list[tuple[str, type]], keys: int, gap_s: float = 0.3):
    """Press `keys` keys from `sequence` (key, the screen class it shows) in turn; each one's seconds from
    entering the app's queue to the moment the new screen is written out to the terminal. Returns (seconds
    per key, ms per key by screen name)."""
    from textual.screen import Screen

    lat: list[float] = []
    per_screen: dict[str, list[float]] = {}
    painted: dict[str, float] = {}
    original = Screen._compositor_refresh

    def timed_refresh(screen: Screen) -> None:  # the moment a screen is written out to the terminal
        original(screen)
        if screen is app.screen:
            painted.setdefault(type(screen).__name__, time.perf_counter())

    Screen._compositor_refresh = timed_refresh  # type: ignore[method-assign]
    try:
        for i in range(keys):
            key, kind = sequence[i % len(sequence)]
            painted.clear()
            t0 = time.perf_counter()
            app.simulate_key(key)  # the key enters the app's queue as the driver would put it
            while kind.__name__ not in painted and time.perf_counter() - t0 < 10:
                await asyncio.sleep(0.001)
            lat.append(painted.get(kind.__name__, time.perf_counter()) - t0)
            per_screen.setdefault(kind.__name__, []).append(lat[-1] * 1000)
            await asyncio.sleep(gap_s)  # let telemetry and the run redraw in between
    finally:
        Screen._compositor_refresh = original  # type: ignore[method-assign]
    return lat, per_screen


def latency_figures(lat: list[float], per_screen: dict[str, list[float]]) -> dict:
    lat_ms = sorted(x * 1000 for x in lat)
    return {
        "keys": len(lat_ms),
        "p50_ms": statistics.median(lat_ms),
        "p95_ms": lat_ms[int(0.95 * (len(lat_ms) - 1))],
        "max_ms": lat_ms[-1],
        "per_screen": {k: (statistics.median(v), max(v)) for k, v in per_screen.items()},
    }


async def keypress_latency(keys: int, replay_limit: int, draws: str = "all") -> dict:
    from frank.console.app import FrankApp, default_services
    from frank.console.screens.dashboard import DashboardScreen
    from frank.console.screens.logs import LogsScreen
    from frank.console.screens.replays import ReplaysScreen

    app = FrankApp(default_services(None, 1.0), remember_theme=False, offer_start=False)
    async with app.run_test(size=(120, 36)) as pilot:
        for _ in range(100):
            await pilot.pause(0.1)
            if app.engine_status is not None:
                break
        if app.engine_state != "ready":
            raise SystemExit(f"the engine is {app.engine_state}; start it first (or pass --start)")
        await pilot.press("2")
        await pilot.pause(1.0)
        screen = app.screen
        screen.query_one("#rep-limit").value = str(replay_limit)
        screen.query_one("#rep-draws").value = draws
        screen.query_one("#workloads").focus()
        await pilot.press("enter")
        for _ in range(600):
            await pilot.pause(0.1)
            if app.job is not None and app.job.records:  # the detached replay job, followed
                break
        sequence = [("4", LogsScreen), ("1", DashboardScreen), ("2", ReplaysScreen), ("1", DashboardScreen)]
        lat, per_screen = await key_to_paint(app, sequence, keys)
        job = app.job
        done = job.status.done if job and job.status else 0
        still_running = bool(job and job.running)
    if job is not None and still_running:
        from frank import jobs

        jobs.cancel(job.run_id, wait_s=60)  # the job outlives the console: stop it here
    return {
        **latency_figures(lat, per_screen),
        "replay_requests_during": done,
        "replay_still_running": still_running,
    }


def _tmux_session(tmux: str, socket: str, command: str, cwd: str) -> tuple[str, psutil.Process]:
    """Start `command` in `cwd` in a new 120x36 session of a private tmux server; returns (name, the pane's
    process). The directory matters: `python -m frank...` imports frank from it before PYTHONPATH."""
    name = f"bench-{uuid.uuid4().hex[:6]}"
    subprocess.run(
        [tmux, "-L", socket, "new-session", "-d", "-s", name, "-c", cwd, "-x", "120", "-y", "36", command], check=True
    )
    pid = int(
        subprocess.run(
            [tmux, "-L", socket, "display-message", "-p", "-t", name, "#{pane_pid}"], capture_output=True, text=True
        ).stdout.strip()
    )
    return name, psutil.Process(pid)


def idle_cpu(seconds: float, baseline_src: str | None = None, peer: str | None = None, settle_s: float = 70.0) -> dict:
    tmux = shutil.which("tmux")
    if tmux is None:
        raise SystemExit("tmux is needed for the idle CPU measurement")
    from frank.engine.controller import EngineController

    socket = f"frank-bench-{uuid.uuid4().hex[:6]}"  # a private server: sessions get exactly this env
    keep = {k: os.environ[k] for k in ("FRANK_HOME", "FRANK_MODELS") if k in os.environ}

    def env(pythonpath):
        return "env " + " ".join(f"{k}={v}" for k, v in {**keep, "PYTHONPATH": pythonpath}.items())

    commands = {CONSOLE: (f"{env(str(REPO))} {sys.executable} -m frank.console.cli", str(REPO))}
    if baseline_src:
        commands["baseline console"] = (f"{env(baseline_src)} {sys.executable} -m frank.console.cli", baseline_src)
    if peer:
        url = EngineController().status().url
        commands[PEER] = (f"{peer} --url {url} --interval {PEER_INTERVAL_S:g}", str(REPO))
    sessions = {label: _tmux_session(tmux, socket, cmd, cwd) for label, (cmd, cwd) in commands.items()}
    sampler = subprocess.Popen([sys.executable, "-c", SAMPLER_ONLY, str(seconds + 15)], cwd=str(REPO))
    try:
        time.sleep(settle_s)  # start-up (imports, first paint, the sparklines filling their window) is not idle
        procs = {label: proc for label, (_, proc) in sessions.items()}
        procs[SAMPLER] = psutil.Process(sampler.pid)
        c0, t0 = {k: cpu_seconds(p) for k, p in procs.items()}, time.monotonic()
        time.sleep(seconds)
        c1, t1 = {k: cpu_seconds(p) for k, p in procs.items()}, time.monotonic()
        panes = {
            label: subprocess.run(
                [tmux, "-L", socket, "capture-pane", "-p", "-t", name], capture_output=True, text=True
            ).stdout
            for label, (name, _) in sessions.items()
        }
    finally:
        subprocess.run([tmux, "-L", socket, "kill-server"], capture_output=True)
        sampler.wait(timeout=30)
    wall = t1 - t0
    return {
        "wall_s": wall,
        "cpu_pct": {k: 100 * (c1[k] - c0[k]) / wall for k in procs},
        "dashboard_showed_ready": {k: "● ready" in v for k, v in panes.items() if "console" in k},
        "peer_showed": {k: bool(v.strip()) for k, v in panes.items() if k == PEER},
    }


def refresh_intervals(with_peer: bool) -> str:
    """How often each tool redraws in this run: a fair comparison needs the same interval."""
    from frank.console import config

    every = config.load()[0].refresh_s
    console = f"console: a sample every {every:g} s, the rows it changed redrawn (refresh_s, {config.config_path()})"
    if not with_peer:
        return console
    peer = PEER.removeprefix("peer ")
    return f"{console}; {peer}: a /metrics fetch and a full redraw every {PEER_INTERVAL_S:g} s, keys polled every 0.2 s"


def verdict(cpu_pct: dict[str, float]) -> str:
    ours, peer = cpu_pct[CONSOLE], cpu_pct.get(PEER)
    if peer is None:
        return "verdict: no peer measured (--no-peer)"
    word = "BELOW" if ours < peer else "NOT below"
    return f"verdict: the console's idle CPU is {word} vllm-htop's in the same run ({ours:.2f}% vs {peer:.2f}%, {ours / peer:.2f}x)"  # noqa: E501


async def breakdown(seconds: float) -> list[tuple[str, float, float, float]]:
    """(what, calls per second, ms of thread CPU each, % of a core) for each Textual timer callback and screen
    repaint of the idle console, headless, over the running engine."""
    from textual.screen import Screen
    from textual.timer import Timer

    from frank.console.app import FrankApp, default_services

    costs: dict[str, list[float]] = {}

    def timed(cls: type, name: str, label) -> None:
        original = getattr(cls, name)
        if asyncio.iscoroutinefunction(original):

            async def wrapper(self, *args, **kwargs):
                t0 = time.thread_time()
                try:
                    return await original(self, *args, **kwargs)
                finally:
                    entry = costs.setdefault(label(self), [0, 0.0])
                    entry[0] += 1
                    entry[1] += time.thread_time() - t0
        else:

            def wrapper(self, *args, **kwargs):
                t0 = time.thread_time()
                try:
                    return original(self, *args, **kwargs)
                finally:
                    entry = costs.setdefault(label(self), [0, 0.0])
                    entry[0] += 1
                    entry[1] += time.thread_time() - t0

        setattr(cls, name, wrapper)

    def timer_label(timer: Timer) -> str:
        callback = timer._callback
        target = getattr(callback, "args", (None,))[0] if hasattr(callback, "func") else callback
        return f"timer {getattr(target, '__qualname__', None) or getattr(callback, '__qualname__', timer.name)}"

    timed(Timer, "_tick", timer_label)  # every timer's callback (the app's tick, polls, Textual's own)
    timed(Screen, "_compositor_refresh", lambda screen: "  of which the repaint (Screen._compositor_refresh)")
    app = FrankApp(default_services(None, 1.0), remember_theme=False, offer_start=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(10)
        costs.clear()
        t0, c0 = time.monotonic(), time.process_time()
        await pilot.pause(seconds)
        wall, cpu = time.monotonic() - t0, time.process_time() - c0
    rows = [("whole process, headless (sampler thread included)", 0.0, 0.0, 100 * cpu / wall)]
    for what, (n, spent) in sorted(costs.items(), key=lambda kv: -kv[1][1]):
        rows.append((what, n / wall, 1000 * spent / n if n else 0.0, 100 * spent / wall))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--start", action="store_true", help="start the embedded engine first (stopped at the end)")
    parser.add_argument("--idle-s", type=float, default=60.0)
    parser.add_argument(
        "--settle-s",
        type=float,
        default=70.0,
        help="seconds before the idle window: start-up, and the 60 s sparklines filling (each new point redraws)",
    )
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--replay-limit", type=int, default=45, help="requests per draw (W01 mini has 45)")
    parser.add_argument("--draws", default="all", help="draws of W01 mini to replay: draw-2, or all")
    parser.add_argument("--skip-keys", action="store_true")
    parser.add_argument("--skip-idle", action="store_true")
    parser.add_argument("--baseline-src", help="another source tree whose console runs idle beside ours")
    parser.add_argument("--peer", help="path to vllm-htop (default: installed into .build/peer-venv from PyPI)")
    parser.add_argument("--no-peer", action="store_true", help="measure the console without the peer")
    parser.add_argument("--breakdown", action="store_true", help="time the idle console's timers and repaints")
    args = parser.parse_args()
    from frank.engine.controller import EngineController

    controller = EngineController()
    started = False
    if args.start and controller.status().state != "ready":
        st = controller.start()
        started = True
        print(f"engine ready in {st.ready_s:.1f} s")
    try:
        print(f"cores: {psutil.cpu_count()}  load: {os.getloadavg()[0]:.2f}")
        if not args.skip_keys:
            r = asyncio.run(keypress_latency(args.keys, args.replay_limit, args.draws))
            print(
                f"keypress -> screen rendered, {r['keys']} keys during a replay ({r['replay_requests_during']} "
                f"requests recorded, still running at the end: {r['replay_still_running']}) and 1 s telemetry: p50 {r['p50_ms']:.1f} ms, p95 {r['p95_ms']:.1f} ms, "  # noqa: E501
                f"max {r['max_ms']:.1f} ms (target < 100 ms)"
            )
            print(
                "  per target screen (p50 / max ms): "
                + ", ".join(f"{k} {p50:.0f}/{mx:.0f}" for k, (p50, mx) in r["per_screen"].items())
            )
        if not args.skip_idle:
            peer = None if args.no_peer else str(ensure_peer(args.peer))
            r = idle_cpu(args.idle_s, args.baseline_src, peer, args.settle_s)
            print(
                f"idle, engine ready, side by side over the same {r['wall_s']:.0f} s (load "
                f"{os.getloadavg()[0]:.2f} on {psutil.cpu_count()} cores; target: the console below the peer):"
            )
            print(f"  refresh: {refresh_intervals(peer is not None)}")
            for label, value in r["cpu_pct"].items():
                print(f"  {label:32s} {value:6.2f}% of one core")
            print(f"  dashboards showed ready: {r['dashboard_showed_ready']}; peer drew its screen: {r['peer_showed']}")
            print(verdict(r["cpu_pct"]))
        if args.breakdown:
            rows = asyncio.run(breakdown(args.idle_s))
            print(f"where the idle console's CPU goes, headless over {args.idle_s:.0f} s (thread CPU per call):")
            for what, per_s, ms_each, pct in rows:
                calls = f"{per_s:5.2f}/s {ms_each:7.2f} ms each" if per_s else " " * 23
                print(f"  {what[:70]:70s} {calls}  {pct:5.2f}% of a core")
    finally:
        if started:
            controller.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
