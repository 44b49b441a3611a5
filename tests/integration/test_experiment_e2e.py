"""A registered 1-block experiment on the real embedded engine, end to end: register, run through the CLI,
SIGKILL the runner in the middle of a cell (its engine is left running), resume, report.

Arms differ by a restart knob (num_speculative_tokens 2 vs 4), so every cell is a fresh engine start. The
smallest design that still has a recorded cell before the kill and one after the resume: two cells, the
second one cut off while its engine starts and redone, three starts in all (about 40 s each here). Each
cell replays two small requests and measures fidelity; with one control start the fidelity floor is the
reference's alone (the two-control-start engine floor is tests/unit/test_experiment_fidelity.py's, and
`frank fidelity floor`'s two real starts are tests/integration/test_fidelity_engine.py's)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from frank.engine.controller import EngineController
from frank.experiments import registry
from frank.experiments.journal import read_events
from frank.paths import REPO_ROOT
from frank.workloads.format import write_workload

pytestmark = pytest.mark.engine

CODE = (
    "def merge(a, b):\n    out = []\n    i = j = 0\n    while i < len(a) and j < len(b):\n"
    "        if a[i] <= b[j]:\n            out.append(a[i]); i += 1\n"
    "        else:\n            out.append(b[j]); j += 1\n    return out + a[i:] + b[j:]\n"
)

DESIGN = """
name = "e2e-spec-tokens"
question = "Do 4 speculative tokens give more output tokens per second than 2 on the tiny model?"
profile = "embedded-cpu"

[[arms]]
name = "spec-2"
knobs = {{ num_speculative_tokens = 2 }}

[[arms]]
name = "spec-4"
knobs = {{ num_speculative_tokens = 4 }}

[design]
kind = "blocks"
blocks = 1

[workload]
name = "{workload}"
mode = "full"
requests = 2

[measure]
name = "tokens_per_s"

[rule]
test = "sign"
treatment = "spec-4"
control = "spec-2"
direction = "higher"

[guards]
prompt_token_ids_identical = true
no_failed_requests = true

[failure]
action = "retry"
max_retries = 1

[fidelity]                       # every cell also measures fidelity on a small set (seconds)
sets = ["{fidelity_set}"]
"""


def tiny_workload(path: Path) -> Path:
    records = []
    for turn in (1, 2):
        messages = [
            {"role": "system", "content": "You review code."},
            {"role": "user", "content": f"Review this code (part {turn}):\n{CODE * (2 + turn)}"},
        ]
        records.append(
            {
                "id": f"r{turn}",
                "task": "review",
                "episode": "e1",
                "turn": turn,
                "offset_s": 0.0,
                "body": {"model": "tiny-frank", "messages": messages, "max_tokens": 32, "temperature": 0},
            }
        )
    return write_workload(path, "tiny-e2e", "two small requests for the experiment e2e test", [("1", records)])


def next_event(journal: Path, predicate, timeout_s: float) -> dict:
    """The first journal event matching `predicate`, polled until `timeout_s` (then an AssertionError)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for event in read_events(journal):
            if predicate(event):
                return event
        time.sleep(0.5)
    raise AssertionError(f"no matching event in {journal} after {timeout_s} s: {read_events(journal)[-3:]}")


@pytest.mark.timeout(1800)
def test_registered_experiment_survives_a_runner_kill(frank_cli, fresh_frank_home: Path, tmp_path: Path) -> None:
    workload = tiny_workload(tmp_path / "tiny")
    design = tmp_path / "design.toml"
    from frank.fidelity.sets import Document, write_set

    fidelity_set = write_set(tmp_path / "fid", "fid", "one short document", [Document("d", CODE * 3)], max_tokens=48)
    design.write_text(DESIGN.format(workload=workload, fidelity_set=fidelity_set))

    reg = frank_cli("experiment", "register", str(design), "--json", timeout=120)
    assert reg.returncode == 0, reg.stderr
    info = json.loads(reg.stdout)
    run_id = info["run_id"]
    assert info["order_count"] == 2 and len(info["order"]) == 2 and info["smallest_p_fraction"] == "1/2"
    run = registry.load_run(run_id)
    journal = run.journal_path

    # first runner: SIGKILL it while the second cell's engine is starting (the first cell is recorded)
    runner = subprocess.Popen(
        [sys.executable, "-m", "frank.console.cli", "experiment", "run", run_id],
        cwd=str(REPO_ROOT),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    controller = EngineController()
    try:
        next_event(journal, lambda e: e["event"] == "runner_started", 60)
        second = frank_cli("experiment", "run", run_id, timeout=120)  # the lock keeps a second runner off
        assert second.returncode != 0 and "another runner" in second.stderr
        next_event(journal, lambda e: e["event"] == "cell_started" and e["slot"] == 1, 600)
        deadline = time.monotonic() + 60
        while controller.status(check_health=False).state == "stopped" and time.monotonic() < deadline:
            time.sleep(0.2)
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=30)
        before = journal.read_bytes()
        assert read_events(journal)[-1]["event"] == "cell_started", "killed mid-cell"
        assert controller.status().state in ("starting", "ready"), "the cut-off cell's engine outlives the runner"

        resumed = frank_cli("experiment", "run", run_id, "--json", timeout=1500)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert json.loads(resumed.stdout)["reason"] == "finished"
    finally:
        if runner.poll() is None:
            os.kill(runner.pid, signal.SIGKILL)
        controller.stop()

    after = journal.read_bytes()
    assert after.startswith(before), "nothing recorded before the kill was lost or rewritten"
    events = read_events(journal)
    done = [e for e in events if e["event"] == "cell_done"]
    assert sorted(e["slot"] for e in done) == [0, 1], "every cell measured exactly once"
    cut = [e for e in events if e["event"] == "cell_interrupted"]
    assert len(cut) == 1 and cut[0]["slot"] == 1 and cut[0]["attempt"] == 1 and cut[0]["phase"] == "starting"
    assert cut[0]["cleanup"].startswith("stopped the cut-off cell's engine")
    assert next(e for e in done if e["slot"] == 1)["attempt"] == 2, "redone from its engine start"
    ready = [e for e in events if e["event"] == "engine_ready"]  # the killed start never got ready
    assert sorted(e["slot"] for e in ready) == [0, 1]
    for e in ready:  # each start ran with its arm's knob
        arm = run.slots[e["slot"]].arm
        assert e["knobs"]["num_speculative_tokens"] == {"spec-2": 2, "spec-4": 4}[arm]
    assert controller.status().state == "stopped"

    rep = frank_cli("experiment", "report", run_id, "--json", timeout=120)
    assert rep.returncode == 0, rep.stderr
    report = json.loads(rep.stdout)
    assert report["design_sha256"] == info["design_sha256"]
    assert [o["arm"] for o in report["order"]] == [s["arm"] for s in info["order"]]
    assert report["null_size"] == 2 and len(report["blocks"]) == 1
    wins = sum(1 for b in report["blocks"] if b["sign"] == "+")
    assert report["p_value"] == pytest.approx({0: 1.0, 1: 0.5}[wins])
    assert report["decision"] == ("confirmed" if wins == 1 else "not confirmed")
    for b in report["blocks"]:
        values = b["values"]
        assert values["spec-4"] > 0 and values["spec-2"] > 0
        assert b["effect_pct"] == pytest.approx((values["spec-4"] - values["spec-2"]) / values["spec-2"] * 100)
    guards = {g["name"]: g["status"] for g in report["guards"]}
    # spec tokens do not touch the numerics of a prompt pass: fidelity holds within the measured floor
    assert guards == {"no_failed_requests": "pass", "prompt_token_ids_identical": "pass", "fidelity": "pass"}
    [fid] = report["fidelity"]["sets"]
    assert fid["name"] == str(fidelity_set) and fid["starts"] == {"spec-4": 1, "spec-2": 1} and fid["met"] is True
    assert set(fid["floor_parts"]) == {"reference"} and fid["floor"] == fid["floor_parts"]["reference"]
    assert any("fewer than 2 control starts" in note for note in report["fidelity"]["notes"])
    assert 0 <= fid["treatment"] < 1e-12 and 0 <= fid["control"] < 1e-12
    for measures in report["measures"].values():
        assert measures["total_replay_time"] > 0 and measures["tokens_per_s"] > 0

    status = frank_cli("experiment", "status", run_id, "--json", timeout=120)
    state = json.loads(status.stdout)
    assert state["status"] == "finished" and state["remaining"] == 0 and state["runner_pid"] is None
