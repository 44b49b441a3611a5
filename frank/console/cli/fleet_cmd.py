"""`frank fleet`: the fleet's Prometheus (`prometheus`) and every host's state read from it (`status`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from frank.console.cli.common import emit


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("fleet", help="several workstations: their Prometheus, and each host's state")
    fsub = p.add_subparsers(dest="fleet_command", metavar="ACTION", required=True)
    prom = fsub.add_parser("prometheus", help="write the scrape config and start Prometheus (or reload it)")
    prom.add_argument("--fleet", help="fleet file (default: FRANK_FLEET, else fleet.toml in frank's config dir)")
    prom.add_argument("--stop", action="store_true", help="stop the Prometheus this frank home started")
    prom.add_argument("--json", action="store_true")
    prom.set_defaults(func=cmd_prometheus)
    status = fsub.add_parser("status", help="each host's engine, GPU/CPU figures and what it runs (PromQL)")
    status.add_argument("--fleet", help="fleet file (default: FRANK_FLEET, else fleet.toml in frank's config dir)")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)


def cmd_prometheus(args: argparse.Namespace) -> int:
    from frank.fleet import prometheus
    from frank.fleet.fleetfile import load_fleet

    if args.stop:
        pid = prometheus.stop()
        emit(args.json, {"stopped": pid}, lambda p: f"stopped Prometheus (pid {pid})" if pid else "none was running")
        return 0
    fleet = load_fleet(args.fleet)
    from frank.telemetry.export import is_loopback

    if not is_loopback(fleet.prometheus.rsplit(":", 1)[0].strip("[]")):
        print(
            f"frank: warning: Prometheus serves the network on {fleet.prometheus} (no authentication)", file=sys.stderr
        )
    server = prometheus.start(fleet)
    emit(
        args.json,
        server.to_json(),
        lambda p: (
            f"Prometheus {'reloaded' if p['already_running'] else 'started'} at {p['url']} "
            f"(pid {p['pid']}, config {p['config']}, data {p['data']})"
        ),
    )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from frank.fleet.fleetfile import load_fleet
    from frank.fleet.query import fleet_status

    fleet = load_fleet(args.fleet)
    hosts = [h.to_json() for h in fleet_status(fleet)]
    emit(args.json, {"prometheus": fleet.prometheus_url, "hosts": hosts}, _human)
    return 0


def _num(value: Any, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def _human(payload: dict[str, Any]) -> str:
    lines = [f"fleet via {payload['prometheus']}"]
    for h in payload["hosts"]:
        f = h["figures"]
        runs = " ".join(f"{k}={v}" for k, v in h["runs"].items()) or "-"
        lines.append(
            f"{h['host']:<12} {h['engine']:<14} cpu {_num(f['cpu_percent'], '{:.0f}')}% "
            f"gpu {_num(f['gpu_util_percent'], '{:.0f}')}% pool {_num(f['cpu_pool_busy_percent'], '{:.0f}')}% "
            f"step {_num(f['verify_step_s'], '{:.4f}')} s {_num(f['tokens_per_s'], '{:.1f}')} tok/s  {runs}"
        )
    return "\n".join(lines)
