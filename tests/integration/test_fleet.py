"""Two "workstations" on this machine, for real: a Ray head and a second Ray node (each its own FRANK_HOME
and `llamacpp-cpu-moe` engine), each host's exporter, and a Prometheus scraping both. An A/A design with
`hosts = ["a", "b"]` runs over them to its report, its cells on a and b side by side: the runner is killed
with a cell in flight on each host and resumed, host b's Ray node is killed mid-cell, and the run finished
on resume; the fleet status, the Grafana dashboard's queries and the console's fleet screen read
the live Prometheus. One cluster for the module; every process is stopped at the end, even on failure.

Ray replaces 127.0.0.1 by the machine's own address when it names a node (multi-node clusters), so the
nodes are named 127.0.0.2: another loopback address.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from frank.engine.controller import EngineController
from frank.experiments.journal import fold
from frank.fleet.fleetfile import load_fleet
from frank.fleet.query import PromClient
from frank.fleet.query import fleet_status as fleet_status_of
from tests.short_workload import write_short_workload

pytestmark = pytest.mark.engine

RAY = str(Path(sys.executable).parent / "ray")
NODE_IP = "127.0.0.2"
SCRAPE_S = 1
# The head declares a silent node dead after 3 missed health checks of 1 s (Ray's default: 5 of 3 s).
RAY_ENV = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}

DESIGN = """
name = "fleet-aa"
question = "Do two identical hosts replay the short workload alike? (A/A over hosts)"
profile = "llamacpp-cpu-moe"

[[arms]]
name = "a1"

[[arms]]
name = "a2"

[design]
kind = "blocks"
blocks = 2
hosts = ["a", "b"]

[workload]
name = "{workload}"
mode = "full"
max_tokens = 48

[measure]
name = "total_replay_time"

[rule]
test = "sign"
treatment = "a2"
control = "a1"
direction = "lower"

[failure]
action = "retry"
max_retries = 2
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


def kill_group(pgid: int) -> None:
    """SIGKILL a Ray node's processes (a lost machine; Ray's own SIGTERM path takes seconds a node)."""
    for sig in (signal.SIGKILL,):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


@dataclass
class Cluster:
    tmp: Path
    coordinator: Path  # FRANK_HOME of the runner and Prometheus
    homes: dict[str, Path]
    fleet_file: Path
    gcs: str
    prometheus: str
    exporters: dict[str, subprocess.Popen[str]] = field(default_factory=dict)
    ray_groups: dict[str, int] = field(default_factory=dict)

    def start_node(self, name: str) -> None:
        head = name == "a"
        args = ["--head", f"--port={self.gcs.rsplit(':', 1)[1]}", "--include-dashboard=false"] if head else [
            f"--address={self.gcs}"]  # fmt: skip
        env = {**os.environ, **RAY_ENV, "FRANK_HOME": str(self.homes[name])}
        proc = subprocess.Popen(
            [RAY, "start", *args, f"--node-ip-address={NODE_IP}", "--num-cpus=1", "--disable-usage-stats",
             f"--resources={json.dumps({f'host-{name}': 1})}"],  # fmt: skip
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        self.ray_groups[name] = proc.pid  # the node's processes keep the group of `ray start` after it exits
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out[-3000:]

    def kill_node(self, name: str) -> None:
        kill_group(self.ray_groups.pop(name))

    def start_exporter(self, name: str, port: int) -> None:
        env = {**os.environ, "FRANK_HOME": str(self.homes[name])}
        self.exporters[name] = subprocess.Popen(
            [sys.executable, "-m", "frank.console.cli", "telemetry", "--export", "prom", "--no-gpu",
             "--listen", f"127.0.0.1:{port}"],  # fmt: skip
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
        )  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, frank_cli: Any) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("fleet")
    homes = {name: tmp / f"home-{name}" for name in ("a", "b")}
    ports = {name: free_port() for name in homes}
    c = Cluster(
        tmp=tmp,
        coordinator=tmp / "home-coordinator",
        homes=homes,
        fleet_file=tmp / "fleet.toml",
        gcs=f"{NODE_IP}:{free_port()}",
        prometheus=f"127.0.0.1:{free_port()}",
    )
    hosts = "".join(f'\n[hosts.{n}]\nexporter = "127.0.0.1:{ports[n]}"\nresource = "host-{n}"\n' for n in homes)
    c.fleet_file.write_text(
        f'[prometheus]\nlisten = "{c.prometheus}"\nscrape_interval_s = {SCRAPE_S}\n\n[ray]\naddress = "{c.gcs}"\n'
        + hosts
    )
    try:
        for name in homes:  # the exporters warm up while the Ray nodes start
            c.start_exporter(name, ports[name])
        for name in homes:
            c.start_node(name)
        started = frank_cli("fleet", "prometheus", "--fleet", str(c.fleet_file), "--json", home=c.coordinator)
        assert started.returncode == 0, started.stderr
        yield c
    finally:
        frank_cli("fleet", "prometheus", "--stop", home=c.coordinator)
        for proc in c.exporters.values():
            proc.terminate()
            proc.wait(10)
        for name in list(c.ray_groups):
            c.kill_node(name)
        for home in homes.values():  # an engine a killed node's cell left running
            EngineController(state_dir=home / "state").stop()


def fleet_status(frank_cli: Any, c: Cluster) -> dict[str, dict[str, Any]]:
    out = frank_cli.json("fleet", "status", "--fleet", str(c.fleet_file), home=c.coordinator)
    return {h["host"]: h for h in out["hosts"]}


def test_prometheus_answers_up_for_every_host(cluster: Cluster, frank_cli: Any) -> None:
    fleet, prom = load_fleet(cluster.fleet_file), PromClient(f"http://{cluster.prometheus}")
    assert wait_for(lambda: all(h.up for h in fleet_status_of(fleet, prom)), 30, "both exporters scraped", 0.2)
    hosts = fleet_status(frank_cli, cluster)  # the command's JSON
    for h in hosts.values():
        assert h["engine"] == "stopped" and h["figures"]["cpu_percent"] is not None
        assert h["figures"]["gpu_util_percent"] is None  # no GPU here: none made up


async def fleet_screen_mid_run(run_id: str, runner: subprocess.Popen[str], shots: str) -> int:
    """The console's fleet screen while `runner` runs, saved (docs/screenshots/fleet.svg is made so) each
    time more hosts show an engine of the run's cells up than before, until both do or the runner ends: how
    many did."""
    from textual.widgets import DataTable

    from frank.console.app import FrankApp, Services

    # the coordinator's own engine is stopped: no start offered over the fleet screen this reads
    app = FrankApp(Services(controller=EngineController(), sampler=None), remember_theme=False, offer_start=False)
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.press("7")
        table = app.screen.query_one("#fleet-hosts", DataTable)
        most = 0
        while runner.poll() is None and most < 2:
            await pilot.pause(0.2)
            busy = sum(  # labelled through Prometheus with the run and the arm, its engine up
                str(table.get_cell(h, "runs")).split() in ([run_id, "a1"], [run_id, "a2"])
                and str(table.get_cell(h, "engine")) in ("starting", "ready")
                for h in ("a", "b")
                if h in table.rows
            )
            if busy > most:
                most = busy
                app.save_screenshot(filename="fleet.svg", path=shots)
    return most


def test_aa_design_over_two_hosts_survives_a_lost_node(
    cluster: Cluster, frank_cli: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    c = cluster
    workload = c.tmp / "wl"
    write_short_workload(workload)
    design = c.tmp / "design.toml"
    design.write_text(DESIGN.format(workload=workload))
    reg = frank_cli.json("experiment", "register", str(design), home=c.coordinator)
    run_id = reg["run_id"]
    journal = c.coordinator / "data" / "runs" / "experiments" / run_id / "journal.jsonl"

    def events() -> list[dict[str, Any]]:
        return [json.loads(line) for line in journal.read_text().splitlines()] if journal.exists() else []

    def run_it() -> subprocess.Popen[str]:
        return frank_cli.popen("experiment", "run", run_id, "--fleet", str(c.fleet_file), "--json", home=c.coordinator)

    engines = {name: EngineController(state_dir=home / "state") for name, home in c.homes.items()}

    def cells_up_on(hosts: str, after: int) -> None:  # a cell journaled after event `after`, its engine up
        def up() -> bool:
            started = {e.get("host") for e in events() if e["event"] == "cell_started" and e["seq"] > after}
            return all(h in started and engines[h].status(check_health=False).state in ("starting", "ready")
                       for h in hosts)  # fmt: skip

        assert wait_for(up, 240, f"a cell with its engine up on host(s) {', '.join(hosts)}", every_s=0.05)

    runner = run_it()
    try:
        cells_up_on("ab", 0)
        runner.kill()  # the runner dies (kill -9) with a cell in flight on each host
        runner.wait(30)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(30)
    cut = fold(events()).open_attempts
    assert sorted(a.started["host"] for a in cut) == ["a", "b"], "one open cell a host in the journal"
    killed_at = events()[-1]["seq"]

    runner = run_it()  # resumed: each host's cut-off cell is recorded, its engine stopped, and redone
    try:
        cells_up_on("b", killed_at)
        c.kill_node("b")  # mid-cell: its raylet and worker gone, its engine left behind
        out, _ = runner.communicate(timeout=240)
    finally:
        if runner.poll() is None:
            runner.terminate()
            runner.wait(60)
    interrupted = [e for e in events() if e["event"] == "cell_interrupted"]
    assert sorted((e["slot"], e["attempt"], e["host"]) for e in interrupted) == sorted(
        (a.slot, a.attempt, a.started["host"]) for a in cut
    )
    assert all("previous runner ended mid-cell" in e["reason"] for e in interrupted), interrupted
    print("cut off with the runner:", "; ".join(f"{e['host']}: {e['cleanup']}" for e in interrupted))
    assert runner.returncode != 0, out
    evs = events()
    failed = [e for e in evs if e["event"] == "cell_failed"]
    assert len(failed) == 1 and failed[0]["host"] == "b" and "mid-cell" in failed[0]["error"]
    stopped = [e for e in evs if e["event"] == "runner_stopped"][-1]
    assert (
        stopped["reason"] == "error"
        and "host b" in stopped["message"]
        and "not in the Ray cluster" in stopped["message"]
    )

    assert fold(evs).open_attempts == (), "host a's cell in flight was finished and recorded before the stop"

    c.start_node("b")  # the host is back: the run resumes where it stopped
    resumed = run_it()
    try:
        with monkeypatch.context() as env:  # the console of the coordinator, mid-run
            env.setenv("FRANK_HOME", str(c.coordinator))
            env.setenv("FRANK_FLEET", str(c.fleet_file))
            busy = asyncio.run(
                fleet_screen_mid_run(run_id, resumed, os.environ.get("FRANK_SHOTS_DIR") or str(tmp_path))
            )
        out, _ = resumed.communicate(timeout=600)
    finally:
        if resumed.poll() is None:
            resumed.terminate()
            resumed.wait(60)
    assert resumed.returncode == 0, out[-3000:]
    assert json.loads(out)["reason"] == "finished"
    assert busy >= 1, "the fleet screen showed a host running the run's cell"
    print(f"fleet screen mid-run: {busy} host(s) shown running the run's cells")

    evs = events()
    cell_events = [e for e in evs if e.get("slot") is not None and e["event"] != "block_voided"]
    assert cell_events and all(e.get("host") in ("a", "b") for e in cell_events)  # the host in every event
    done = {e["slot"]: e for e in evs if e["event"] == "cell_done"}
    assert len(done) == 4
    blocks: dict[int, set[str]] = {}
    for e in done.values():
        blocks.setdefault(e["block"], set()).add(e["host"])
    assert sorted(blocks) == [1, 2] and blocks[1] == {"a"} and blocks[2] == {"b"}  # dealt in drawn order
    # each cell run to its end, done or failed, [cell_started, cell_done/failed]: one at a time could not overlap
    started = {(e["slot"], e["attempt"]): e["unix"] for e in evs if e["event"] == "cell_started"}
    ran = [e for e in evs if e["event"] in ("cell_done", "cell_failed")]
    spans = [(e["host"], started[(e["slot"], e["attempt"])], e["unix"]) for e in ran]
    overlaps = [
        min(a_end, b_end) - max(a_start, b_start)
        for host_a, a_start, a_end in spans
        for host_b, b_start, b_end in spans
        if (host_a, host_b) == ("a", "b")
    ]
    assert max(overlaps) > 0, f"no cell on a ran while one on b did: {spans}"  # side by side, not in turns
    print(f"fleet A/A: cells on a and b ran side by side for {max(overlaps):.1f} s")
    assert not (c.homes["b"] / "state" / "activity.json").exists()
    assert EngineController(state_dir=c.homes["b"] / "state").status().state == "stopped"  # the leftover stopped

    report = frank_cli.json("experiment", "report", run_id, home=c.coordinator)
    assert [(b["block"], b["host"]) for b in report["blocks"]] == [(1, "a"), (2, "b")]
    assert report["decision"] in ("confirmed", "not confirmed") and report["p_value"] in (0.25, 0.75, 1.0)
    print(f"fleet A/A: {report['decision']}, p = {report['p_fraction']}, blocks {report['blocks']}")


def test_the_grafana_dashboard_queries_the_live_prometheus(cluster: Cluster) -> None:
    dashboard = json.loads((Path(__file__).parents[2] / "frank/fleet/grafana/frank-fleet.json").read_text())
    client = PromClient(f"http://{cluster.prometheus}")
    answered = {}
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            answered[panel["title"]] = {r[0].get("host") for r in client.query(target["expr"])}  # PromQL errors raise
    for title in ("Exporter up", "Engine state", "CPU (mean of cores)", "Host RAM used", "Sample cost"):
        assert answered[title] == {"a", "b"}, (title, answered[title])
    assert answered["GPU utilisation"] == set()  # no GPU on this machine: no series, none made up


async def test_the_fleet_screen_reads_prometheus_and_shows_a_silent_host(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from textual.widgets import DataTable

    from frank.console.app import FrankApp, Services
    from frank.console.screens.fleet import FleetScreen

    monkeypatch.setenv("FRANK_HOME", str(cluster.coordinator))
    monkeypatch.setenv("FRANK_FLEET", str(cluster.fleet_file))
    # the coordinator's own engine is stopped: no start offered over the fleet screen this test reads
    app = FrankApp(Services(controller=EngineController(), sampler=None), remember_theme=False, offer_start=False)

    async def until(predicate: Callable[[], bool], timeout_s: float) -> bool:
        for _ in range(int(timeout_s / 0.1)):
            await pilot.pause(0.1)
            if predicate():
                return True
        return predicate()

    def engine_cell(host: str) -> str:
        return str(table.get_cell(host, "engine")) if host in table.rows else ""

    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.press("7")
        assert isinstance(app.screen, FleetScreen)
        table = app.screen.query_one("#fleet-hosts", DataTable)
        assert await until(lambda: engine_cell("a") == "stopped" and engine_cell("b") == "stopped", 20)
        cluster.exporters["b"].terminate()  # host b's exporter stops answering
        cluster.exporters["b"].wait(10)
        silent = time.monotonic()
        assert await until(lambda: engine_cell("b") == "not answering", 3 * SCRAPE_S + 5)
        print(f"fleet screen: host b shown as not answering {time.monotonic() - silent:.1f} s after it went silent")
        assert engine_cell("a") == "stopped"
