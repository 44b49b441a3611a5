"""frank.telemetry.sampler: one thread, bounded history, no overlap, immutable snapshots, engine states;
frank.telemetry.export and `frank telemetry` on top of it. /metrics comes from recorded real-engine text."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from frank.telemetry import export
from frank.telemetry.sampler import Sampler, Target, controller_target, snapshot_to_json, static_target
from tests.polling import wait_for
from tests.unit.metrics_server import FaultyMetricsServer

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "metrics"
REPO = Path(__file__).resolve().parent.parent.parent


@pytest.fixture
def server():
    srv = FaultyMetricsServer((FIX / "before.txt").read_text())
    yield srv
    srv.close()


def test_history_is_bounded_and_at_least_ten_minutes_by_default():
    assert Sampler(gpu=False).capacity >= 600
    s = Sampler(period_s=1.0, history_s=5, gpu=False)
    for _ in range(7):
        s.sample_once()
    hist = s.history()
    assert len(hist) == 5 and [x.seq for x in hist] == [3, 4, 5, 6, 7]
    assert s.latest().seq == 7
    assert len(s.history(seconds=0)) == 1


def test_snapshots_are_immutable():
    snap = Sampler(gpu=False).sample_once()
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.seq = 99
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.cpu.total_percent = 0.0


def test_no_engine_and_down_engine():
    snap = Sampler(gpu=False).sample_once()
    assert snap.engine.state == "stopped" and snap.engine.metrics is None
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    snap = Sampler(static_target(f"http://127.0.0.1:{port}"), gpu=False).sample_once()
    assert snap.engine.state == "unreachable" and snap.engine.error
    starting = Sampler(lambda: Target(f"http://127.0.0.1:{port}", None, state="starting"), gpu=False).sample_once()
    assert starting.engine.state == "starting"  # a refused connection while the controller says starting


def test_a_target_that_raises_is_reported_not_fatal():
    def broken():
        raise OSError("engine.json torn")

    snap = Sampler(broken, gpu=False).sample_once()
    assert snap.engine.state == "error" and "engine.json torn" in snap.engine.error


def test_rates_last_request_and_restart(server):
    s = Sampler(static_target(server.url, os.getpid()), gpu=False, rate_window_s=60)
    first = s.sample_once()
    assert first.engine.state == "ready" and first.engine.metrics.ok and first.engine.rates is None
    assert first.cpu.engine is not None and first.cpu.engine.pid == os.getpid()
    server.body = (FIX / "after.txt").read_text()
    second = s.sample_once()
    req = json.loads((FIX / "request.json").read_text())
    assert second.engine.rates.valid and second.engine.rates.requests_finished == 1
    # the request ran alone between two idle scrapes: its own server-side values
    last = second.engine.last_request
    assert last.attributed and last.generation_tokens == req["usage"]["completion_tokens"]
    server.body = (FIX / "after_restart.txt").read_text()
    third = s.sample_once()
    assert not third.engine.rates.valid and "counter reset" in third.engine.rates.reason
    assert third.engine.last_request == last  # kept, not replaced by a bogus negative delta
    server.body = (FIX / "after_restart.txt").read_text()
    assert s.sample_once().engine.rates.valid  # the window starts again after the restart


def test_thread_never_overlaps_and_keeps_its_period():
    active, peak, calls = [0], [0], []
    lock = threading.Lock()

    def slow_target():
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        calls.append(time.monotonic())
        time.sleep(0.25)  # slower than the period
        with lock:
            active[0] -= 1
        return None

    s = Sampler(slow_target, period_s=0.1, gpu=False)
    t0 = time.monotonic()
    with s:
        assert wait_for(lambda: len(calls) >= 4, 10), calls
    elapsed = time.monotonic() - t0
    assert peak[0] == 1
    gaps = [b - a for a, b in zip(calls, calls[1:])]
    assert len(gaps) >= 3 and min(gaps) >= 0.25  # the next read waits for the previous one
    assert len(calls) <= elapsed / 0.25 + 1  # never more reads than 0.25 s reads fit in the time


def test_subscribe_unsubscribe_and_a_broken_subscriber():
    got: list[int] = []
    s = Sampler(period_s=0.05, gpu=False)
    s.subscribe(lambda snap: 1 / 0)
    unsub = s.subscribe(lambda snap: got.append(snap.seq))
    with s:
        assert wait_for(lambda: len(got) >= 3, 5), got
        unsub()
        n, seq = len(got), s.latest().seq
        # three more samples are taken (and sent to the broken subscriber) while the unsubscribed one gets none
        assert wait_for(lambda: s.latest().seq >= seq + 3, 5)
    assert n >= 3 and len(got) <= n + 1 and s.errors >= n + 3
    assert got == sorted(got)


def test_sampler_thread_cpu_use_is_small():
    """Not a perf target (benchmarks/bench_telemetry.py measures that): a guard against a busy loop."""
    s = Sampler(period_s=0.05, gpu=False)
    me = psutil.Process()
    with s:
        assert wait_for(lambda: s.latest() is not None, 5)
        seq, t0 = s.latest().seq, sum(me.cpu_times()[:2])
        assert wait_for(lambda: s.latest().seq >= seq + 20, 10)  # 20 samples, about a second
        used = sum(me.cpu_times()[:2]) - t0
    assert used < 0.5


def test_snapshot_json(server):
    s = Sampler(static_target(server.url), gpu=False)
    s.sample_once()
    payload = snapshot_to_json(s.sample_once())
    json.dumps(payload)
    assert {"cpu", "gpus", "gpu_error", "engine"} <= payload.keys() and "per_core" in payload["cpu"]
    assert payload["engine"]["metrics"]["state"] == "ok" and payload["engine"]["rates"]["valid"]


def test_exporter_serves_the_latest_snapshot(server):
    s = Sampler(static_target(server.url, os.getpid()), gpu=False)
    s.sample_once()
    server.body = (FIX / "after.txt").read_text()
    s.sample_once()
    srv, _ = export.serve(s.latest, "127.0.0.1", 0)
    try:
        text = httpx.get(f"http://127.0.0.1:{srv.server_address[1]}/metrics").text
    finally:
        srv.shutdown()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert len(fams["frank_cpu_core_percent"].samples) == psutil.cpu_count()
    assert fams["frank_gpu_telemetry_up"].samples[0].value == 0.0
    assert fams["frank_engine_up"].samples[0].labels == {"state": "ready"}
    assert fams["frank_engine_generation_tokens_per_second"].samples[0].value > 0
    engine = s.latest().cpu.engine
    assert engine is not None and engine.pid == os.getpid() and engine.cpu_percent is not None
    assert fams["frank_engine_cpu_percent"].samples[0].value == pytest.approx(engine.cpu_percent)  # the snapshot's
    assert 0 <= engine.cpu_percent <= 100 * psutil.cpu_count()  # percent of one core, over this process's tree


def test_listen_parsing_and_loopback():
    assert export.parse_listen("127.0.0.1:9000") == ("127.0.0.1", 9000)
    assert export.parse_listen("9000") == ("127.0.0.1", 9000)
    assert export.parse_listen("[::1]:9000") == ("::1", 9000)
    with pytest.raises(ValueError, match="HOST:PORT"):
        export.parse_listen("127.0.0.1:http")
    assert export.is_loopback("127.0.0.1") and export.is_loopback("::1") and export.is_loopback("localhost")
    assert not export.is_loopback("0.0.0.0") and not export.is_loopback("10.1.2.3")


def test_cli_once_json(frank_cli, server):
    out = frank_cli("telemetry", "--once", "--json", "--period", "0.2", "--url", server.url, timeout=60)
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert len(payload["cpu"]["per_core"]) == psutil.cpu_count()
    assert isinstance(payload["gpus"], list)
    assert payload["gpus"] or payload["gpu_error"].startswith("no GPU telemetry")
    assert payload["engine"]["state"] == "ready" and payload["engine"]["metrics"]["state"] == "ok"


def test_controller_target_without_an_engine(fresh_frank_home):
    from frank.engine.controller import EngineController

    source = controller_target(EngineController())
    assert source() is None
    assert Sampler(source, gpu=False).sample_once().engine.state == "stopped"


def test_cli_once_without_an_engine(frank_cli, fresh_frank_home):
    out = frank_cli("telemetry", "--once", "--json", "--period", "0.1", timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["engine"]["state"] == "stopped"


def test_cli_bad_arguments(frank_cli):
    out = frank_cli("telemetry", "--once", "--period", "0", timeout=60)
    assert out.returncode != 0 and "--period" in out.stderr
    out = frank_cli("telemetry", "--export", "prom", "--listen", "127.0.0.1:notaport", "--duration", "1", timeout=60)
    assert out.returncode != 0 and "--listen" in out.stderr


def test_cli_export(server):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "frank.console.cli",
            "telemetry",
            "--export",
            "prom",
            "--listen",
            "127.0.0.1:0",
            "--period",
            "0.2",
            "--duration",
            "20",
            "--url",
            server.url,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving telemetry at http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split()[3]
        deadline = time.monotonic() + 10
        text = ""
        while "frank_engine_up" not in text and time.monotonic() < deadline:
            time.sleep(0.2)
            text = httpx.get(url).text
        assert 'frank_engine_up{state="ready"} 1.0' in text
    finally:
        proc.terminate()
        proc.wait(10)


def test_controller_target_rereads_status_only_when_something_can_have_changed(tmp_path):
    """The sampler asks for the target every second: the controller's status (three JSON files and a process
    check) is read again only when its state files change, the engine's process group is gone, or the
    recheck time passed."""
    from types import SimpleNamespace

    from frank.engine.controller import EngineStatus

    files = SimpleNamespace(record=tmp_path / "engine.json", run=tmp_path / "run.json", exit=tmp_path / "exit.json")
    files.record.write_text("{}")
    group = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    calls = []

    class Controller:
        files = None
        client_api_key = None

        def status(self, check_health: bool = True) -> EngineStatus:
            calls.append(check_health)
            return EngineStatus(state="ready", pid=group.pid, pgid=group.pid, url="http://127.0.0.1:1", profile=None)

    controller = Controller()
    controller.files = files
    try:
        source = controller_target(controller, recheck_s=0.5)
        targets = [source() for _ in range(5)]
        assert len(calls) == 1 and calls == [False] and targets[0].pid == group.pid and len(set(targets)) == 1
        files.record.write_text('{"ready_s": 1.0}')  # the controller wrote its state: read it again
        source()
        assert len(calls) == 2
        files.exit.write_text("{}")
        source()
        assert len(calls) == 3
        time.sleep(0.6)
        source()
        assert len(calls) == 4  # the recheck time passed
        group.kill()
        group.wait()
        source()
        assert len(calls) == 5  # the engine's group is gone: at once, not at the next recheck
    finally:
        group.kill()
        group.wait()
