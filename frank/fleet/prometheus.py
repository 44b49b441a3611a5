"""The fleet's Prometheus server (Debian's `prometheus` package, which `make setup` installs): a scrape
config written from the fleet file, the server started detached on the fleet file's address (loopback unless
it names another) with its data in frank's data dir, and stopped by its recorded pid.

Each host's exporter (`frank telemetry --export prom`) is one target, labelled `host`; the exporter itself
adds profile, experiment, arm and part to every series (frank.telemetry.activity). The scrape timeout is the
interval, so a host that stops answering reads `up == 0` within one interval.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from frank import paths, readfile
from frank.errors import FrankError
from frank.fleet.fleetfile import Fleet, FleetError

JOB = "frank"
STATE_FILE = "prometheus.json"


def binary() -> str:
    found = shutil.which("prometheus")
    if not found:
        raise FleetError("no `prometheus` on PATH: `make setup` installs Debian's package (apt-get install prometheus)")
    return found


def scrape_config(fleet: Fleet) -> str:
    """prometheus.yml for the fleet (YAML written by hand: JSON strings are valid YAML scalars)."""
    every = f"{fleet.scrape_interval_s}s"
    lines = [
        f"# written by `frank fleet prometheus` from {fleet.path}",
        "global:",
        f"  scrape_interval: {every}",
        f"  scrape_timeout: {every}",
        f"  evaluation_interval: {every}",
        "scrape_configs:",
        f"  - job_name: {JOB}",
        "    metrics_path: /metrics",
        "    static_configs:",
    ]
    for host in fleet.hosts:
        lines += [
            f"      - targets: [{json.dumps(host.exporter)}]",
            f"        labels: {{host: {json.dumps(host.name)}}}",
        ]
    return "\n".join(lines) + "\n"


def data_root() -> Path:
    return paths.private_dir(paths.data_dir() / "prometheus")


@dataclass(frozen=True)
class Server:
    pid: int
    url: str
    config: Path
    data: Path
    log: Path
    already: bool = False  # it was running: its config was reloaded (SIGHUP), not restarted

    def to_json(self) -> dict[str, object]:
        return {
            "pid": self.pid,
            "url": self.url,
            "config": str(self.config),
            "data": str(self.data),
            "log": str(self.log),
            "already_running": self.already,
        }


def _recorded() -> dict[str, object] | None:
    """The running server's record, if its pid is still a prometheus."""
    try:
        record = readfile.read_object(paths.state_dir(create=False) / STATE_FILE)
        proc = psutil.Process(int(record["pid"]))
        if "prometheus" in proc.name() and proc.status() != psutil.STATUS_ZOMBIE:
            return dict(record)
    except (FrankError, OSError, ValueError, KeyError, TypeError, psutil.Error):
        pass
    return None


def start(fleet: Fleet, ready_timeout_s: float = 60.0) -> Server:
    """Write the scrape config and start the server (or reload the running one's config); wait until it is
    ready. A server of this frank home that serves another fleet file or address is refused before anything
    is written: its config stays its own."""
    url = fleet.prometheus_url
    running = _recorded()
    if running is not None:
        serves = str(running.get("fleet") or "")
        if running.get("url") != url or (serves and serves != str(fleet.path.resolve())):
            raise FleetError(
                f"a Prometheus of this frank home serves {serves or 'another fleet'} at {running.get('url')}: "
                f"nothing was written; stop it first (`frank fleet prometheus --stop`) to serve {fleet.path}"
            )
    root = data_root()
    config, data, log = root / "prometheus.yml", paths.private_dir(root / "data"), root / "prometheus.log"
    paths.write_private(config, scrape_config(fleet))
    if running is not None:
        pid = int(str(running["pid"]))
        os.kill(pid, signal.SIGHUP)  # reread prometheus.yml
        return Server(pid, url, config, data, log, already=True)
    command = [
        binary(),
        f"--config.file={config}",
        f"--storage.tsdb.path={data}",
        f"--web.listen-address={fleet.prometheus}",
    ]
    with open(log, "ab") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True)
    record = {"pid": proc.pid, "url": url, "fleet": str(fleet.path.resolve())}
    paths.write_private(paths.state_dir() / STATE_FILE, json.dumps(record))
    deadline = time.monotonic() + ready_timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise FleetError(f"prometheus exited ({proc.returncode}) at start: {_tail(log)}")
        try:
            if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                return Server(proc.pid, url, config, data, log)
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    stop()
    raise FleetError(f"prometheus not ready at {url} after {ready_timeout_s:g} s: {_tail(log)}")


def stop(grace_s: float = 10.0) -> int | None:
    """Stop the recorded server (SIGTERM, then SIGKILL after `grace_s`); its pid, or None if none ran."""
    running = _recorded()
    (paths.state_dir(create=False) / STATE_FILE).unlink(missing_ok=True)
    if running is None:
        return None
    proc = psutil.Process(int(str(running["pid"])))
    proc.terminate()
    try:
        proc.wait(grace_s)
    except psutil.TimeoutExpired:
        proc.kill()
        proc.wait(grace_s)
    return int(proc.pid)


def _tail(log: Path, lines: int = 3) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
