"""`frank telemetry`: CPU, GPU and engine metrics, headless; `--export prom` serves them to Prometheus."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from frank.console.cli.common import emit
from frank.errors import FrankError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("telemetry", help="sample CPU, GPUs and the engine's /metrics (or export them)")
    p.add_argument("--once", action="store_true", help="one sample (taken one period after a priming read)")
    p.add_argument("--duration", type=float, default=None, help="stop after S seconds (default: until Ctrl-C)")
    p.add_argument("--period", type=float, default=1.0, help="seconds between samples (default 1)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout (with --duration: all samples)")
    p.add_argument("--export", choices=["prom"], help="serve the samples in Prometheus format")
    p.add_argument("--listen", default="127.0.0.1:9464", help="HOST:PORT for --export (default 127.0.0.1:9464)")
    p.add_argument("--url", help="watch this server instead of frank's engine")
    p.add_argument("--pid", type=int, help="with --url: the server's pid (for its CPU and GPU use)")
    p.add_argument("--api-key", help="with --url: bearer token for the server")
    p.add_argument("--model", help="with --url: only this served model name's series")
    p.add_argument("--no-gpu", action="store_true", help="skip NVML")
    p.set_defaults(func=cmd_telemetry)


def _sampler(args: argparse.Namespace) -> Any:
    from frank.telemetry.sampler import Sampler, controller_target, static_target

    if args.period <= 0:
        raise FrankError(f"--period {args.period}: must be positive")
    if args.url:
        target = static_target(args.url, args.pid, args.api_key, args.model)
    else:
        target = controller_target()
    return Sampler(target, period_s=args.period, gpu=not args.no_gpu)


def cmd_telemetry(args: argparse.Namespace) -> int:
    if args.duration is not None and args.duration <= 0:
        raise FrankError(f"--duration {args.duration}: must be positive")
    if args.export:
        return _export(args)
    from frank.telemetry.sampler import snapshot_to_json

    sampler = _sampler(args)
    if args.once:
        try:
            sampler.sample_once()  # primes per-core and process CPU deltas
            time.sleep(args.period)
            snap = sampler.sample_once()
        finally:
            sampler.stop()
        emit(args.json, snapshot_to_json(snap), _human)
        return 0
    samples: list[dict[str, Any]] = []

    def on_snapshot(snap: Any) -> None:
        payload = snapshot_to_json(snap)
        if args.json:
            samples.append(payload)
        else:
            sys.stdout.write(_line(payload) + "\n")
            sys.stdout.flush()

    sampler.subscribe(on_snapshot)
    with sampler:
        _wait(args.duration)
    if args.json:
        emit(True, {"period_s": args.period, "samples": samples})
    return 0


def _wait(duration: float | None) -> None:
    try:
        if duration is None:
            while True:
                time.sleep(3600)
        time.sleep(duration)
    except KeyboardInterrupt:
        pass


def _export(args: argparse.Namespace) -> int:
    from frank.telemetry.export import is_loopback, parse_listen, serve

    try:
        host, port = parse_listen(args.listen)
    except ValueError as exc:
        raise FrankError(str(exc)) from exc
    sampler = _sampler(args)
    with sampler:
        try:
            server, _thread = serve(sampler.latest, host, port, labels=None if args.url else _activity_labels())
        except OSError as exc:
            raise FrankError(f"--listen {args.listen}: {exc}") from exc
        real_port = server.server_address[1]
        url = f"http://{'[' + host + ']' if ':' in host else host}:{real_port}/metrics"
        if not is_loopback(host):
            print(f"frank: warning: exporting to the network on {host} (no authentication)", file=sys.stderr)
        emit(
            args.json,
            {"export": "prom", "url": url, "period_s": args.period},
            lambda p: f"serving telemetry at {p['url']} every {p['period_s']:g} s (Ctrl-C stops)",
        )
        try:
            _wait(args.duration)
        finally:
            server.shutdown()
    return 0


def _activity_labels() -> Any:
    """profile, experiment, arm and part for every exported series: the engine's profile (from its state
    files) and what a placed cell says it runs (frank.telemetry.activity)."""
    from frank.engine.controller import EngineController
    from frank.telemetry.activity import activity_labels

    controller = EngineController()

    def labels() -> dict[str, str]:
        st = controller.status(check_health=False)
        return activity_labels(st.profile if st.state != "stopped" else None)

    return labels


def _fmt_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n:.0f} B"
        n /= 1024
    return str(n)


def _num(v: Any, fmt: str = "{:.3g}") -> str:
    return "-" if v is None else fmt.format(v)


def _line(p: dict[str, Any]) -> str:
    cpu = p["cpu"]
    eng = p["engine"]
    e_cpu = (cpu.get("engine") or {}).get("cpu_percent")
    rates = eng.get("rates") or {}
    gpus = " ".join(f"gpu{g['index']}:{_num(g['util_gpu'], '{:.0f}')}%" for g in p["gpus"]) or "no-gpu"
    return (
        f"{time.strftime('%H:%M:%S', time.localtime(p['wall_time']))} cpu {cpu['total_percent']:5.1f}% "
        f"engine-cpu {_num(e_cpu, '{:.0f}')}% {gpus} engine {eng['state']} "
        f"run {_num(rates.get('running'), '{:.0f}')} wait {_num(rates.get('waiting'), '{:.0f}')} "
        f"gen {_num(rates.get('generation_tokens_per_s'), '{:.1f}')} tok/s "
        f"ttft {_num(rates.get('mean_ttft_s'))} s  ({p['cost_ms']['total']:.1f} ms)"
    )


def _rig_lines(p: dict[str, Any]) -> list[str]:
    """The rig's fixed facts (frank.telemetry.rig) and the host's steal, clock and other processes' CPU."""
    rig, cpu = p.get("rig") or {}, p["cpu"]
    host = rig.get("host") or {}
    vm = {True: "a VM", False: "not a VM", None: "VM or not: unknown"}[host.get("hypervisor")]
    clock = (
        f"{cpu['cpu_mhz']:.0f} MHz ({cpu['cpu_mhz_source']})"
        if cpu.get("cpu_mhz") is not None
        else cpu.get("cpu_mhz_source") or "-"
    )
    lines = [
        f"host  {host.get('cpu_model') or 'CPU'}, {host.get('logical_cores')} logical cores, {vm}; clock {clock}; "
        f"steal {_num(cpu.get('steal_percent'), '{:.1f}')}%, "
        f"other processes {_num(cpu.get('others_percent'), '{:.0f}')}% of a core"
    ]
    for g in rig.get("gpus") or ():
        lines.append(
            f"rig   GPU{g['index']}: PCIe gen{g['pcie_gen']} x{g['pcie_width']} of gen{g['pcie_gen_max']} "
            f"x{g['pcie_width_max']}{' (below its maximum)' if g['link_below_max'] else ''}; power limit "
            f"{_num(g['power_limit_w'], '{:.0f}')} W of {_num(g['power_default_limit_w'], '{:.0f}')} W default"
            f"{' (lowered)' if g['power_below_default'] else ''}; clocks up to SM "
            f"{_num(g['sm_clock_max_mhz'], '{:.0f}')} / memory {_num(g['mem_clock_max_mhz'], '{:.0f}')} MHz"
        )
    return lines  # no GPU: the reason is the gpu_error line


def _human(p: dict[str, Any]) -> str:
    cpu = p["cpu"]
    lines = [
        f"CPU   {cpu['total_percent']:.1f}% over {len(cpu['per_core'])} cores: "
        + " ".join(f"{v:.0f}" for v in cpu["per_core"]),
        f"RAM   {_fmt_bytes(cpu['ram_used'])} used of {_fmt_bytes(cpu['ram_total'])}",
    ]
    eng_cpu = cpu.get("engine")
    if eng_cpu:
        lines.append(
            f"engine process tree: {_num(eng_cpu['cpu_percent'], '{:.0f}')}% of a core, "
            f"{eng_cpu['num_threads']} threads, RSS {_fmt_bytes(eng_cpu['rss_bytes'])}, busiest: "
            + (", ".join(f"{t['name']}({t['tid']}) {t['cpu_percent']:.0f}%" for t in eng_cpu["busiest"]) or "-")
        )
    lines += _rig_lines(p)
    if p["gpu_error"]:
        lines.append(p["gpu_error"])
    for g in p["gpus"]:
        lines.append(
            f"GPU{g['index']} {g['name']}: {_num(g['util_gpu'], '{:.0f}')}% mem "
            f"{_fmt_bytes(g['memory_used'])}/{_fmt_bytes(g['memory_total'])} {_num(g['power_w'], '{:.0f}')} W "
            f"{_num(g['temperature_c'], '{:.0f}')} C SM {_num(g['sm_clock_mhz'], '{:.0f}')} MHz "
            f"PCIe gen{g['pcie_gen']} x{g['pcie_width']} tx {_fmt_bytes(g['pcie_tx_bps'])}/s "
            f"rx {_fmt_bytes(g['pcie_rx_bps'])}/s"
        )
    eng = p["engine"]
    lines.append(
        f"engine {eng['state']}"
        + (f" at {eng['url']}" if eng["url"] else "")
        + (f": {eng['error']}" if eng["error"] else "")
    )
    met = eng.get("metrics") or {}
    if met.get("state") == "ok":
        lines.append(
            "  since start: "
            + ", ".join(
                f"{k} {_num(met.get(k))}"
                for k in (
                    "requests_finished",
                    "prompt_tokens",
                    "generation_tokens",
                    "prefix_cache_hit_rate",
                    "mean_ttft_s",
                    "mean_front_end_s",
                    "window_verify_step_s",
                    "mean_acceptance_length",
                )
            )
        )
    rates = eng.get("rates") or {}
    if rates.get("valid"):
        lines.append(
            f"  last {rates['window_s']:.1f} s: "
            + ", ".join(
                f"{k} {_num(rates.get(k))}"
                for k in (
                    "running",
                    "waiting",
                    "kv_cache_usage",
                    "prompt_tokens_per_s",
                    "generation_tokens_per_s",
                    "prefix_cache_hit_rate",
                )
            )
        )
    decode = _cpu_decode_line(p.get("cpu_decode") or {})
    if decode:
        lines.append(decode)
    lines.append(f"sample cost {p['cost_ms']['total']:.2f} ms")
    return "\n".join(lines)


def _cpu_decode_line(dec: dict[str, Any]) -> str | None:
    """The CPU-side decode figures of an exllamav3 engine (frank.telemetry.cpu_decode), or None for another."""
    if dec.get("kind") != "exl3":
        return None
    share = dec.get("gpu_wait_share")
    compute = f"{_num(dec.get('compute_step_s'))} s a step" if dec.get("compute_step_s") is not None else dec["why"]
    stall = f"{_num(dec.get('stall_step_s'))} s a step" if dec.get("stall_step_s") is not None else dec["stall_why"]
    verdict = {True: "settled", False: "settling", None: "no verdict"}[dec.get("settled")]
    busy, spin = dec.get("pool_busy_share"), dec.get("pool_spin_ms")
    pool = "" if busy is None else f"; pool busy {busy * 100:.0f}%"
    if pool and spin is not None:
        pool += f" (waits on the GPU {_num(spin / 1e3)} s a job)"
    return (
        f"  exllamav3 CPU pool: compute {compute}; GPU stall {stall}"
        + (f" ({share * 100:.1f}% of the verify step)" if share is not None else "")
        + f"{pool}; placement {verdict} ({dec.get('settled_why')})"
    )
