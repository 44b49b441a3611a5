"""A full disk under a running replay and a running experiment loses nothing (on the cheapest real engine,
llama.cpp serving SmolLM2, seconds to start). FRANK_HOME is a small tmpfs: the engine's state files, the
replay's records, the experiment's journal and results all live on it. The disk is filled while each run is
going (after its first record); the run must stop naming the file it could not write, with every record
before intact; once the disk is freed, the resumed run must finish with every request recorded once and
the files whole."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from frank import jsonl
from frank.errors import WriteError
from frank.workloads.format import write_workload
from tests.full_disk import fill, tmpfs

pytestmark = pytest.mark.engine
REQUESTS = 12


@pytest.fixture
def disk(tmp_path: Path, monkeypatch):
    with tmpfs(tmp_path / "disk", "24m") as mount:
        monkeypatch.setenv("FRANK_HOME", str(mount / "home"))
        yield mount


def workload(path: Path) -> Path:
    records = [
        {
            "id": f"r{i:02d}",
            "task": "count",
            "episode": "e1",
            "turn": i + 1,
            "offset_s": 0.0,
            "body": {
                "model": "smollm2-135m",
                "max_tokens": 4,
                "temperature": 0,
                "messages": [{"role": "user", "content": f"Count to {i + 3}."}],
            },
        }
        for i in range(REQUESTS)
    ]
    return write_workload(path, "full-disk", "short requests", [("1", records)])


def test_a_replay_on_a_disk_that_fills_up_stops_naming_the_file_and_resumes_once_freed(disk, tmp_path):
    from frank.engine.controller import EngineController
    from frank.workloads.replay import ReplayOptions, read_records, resume_replay, start_replay

    wl = workload(tmp_path / "wl")
    controller = EngineController()
    try:
        status = controller.start("llamacpp-cpu")
        assert status.state == "ready", status
        key = controller.client_api_key
        filled: list[Path] = []

        def progress(event) -> None:
            if getattr(event, "phase", None) == "result" and not filled:
                filled.append(fill(disk))  # the disk fills up under the running replay, after its first record

        out = disk / "replay"
        runner = start_replay(wl, status.url, ReplayOptions(api_key=key), out=out, progress=progress)
        draw_file = runner.draw_file("1")
        # the first write after the disk filled names its file: the summary, or the next request's record
        named = rf"{out}/(1\.jsonl: cannot append a record|summary\.json: cannot write): No space left on device"
        with pytest.raises(WriteError, match=named):
            runner.run_sync()
        kept = read_records(draw_file)
        assert len(kept) >= 1 and draw_file.read_bytes().endswith(b"\n")  # whole lines only
        filled[0].unlink()
        summary = resume_replay(out, status.url, api_key=key).run_sync()
        assert summary.state == "finished", summary
        records = read_records(draw_file)
        assert [r["id"] for r in records] == [f"r{i:02d}" for i in range(REQUESTS)]  # each once, in order
        assert records[: len(kept)] == kept and all(r["status"] == "ok" for r in records)
        assert not jsonl.torn_path(draw_file).exists()
    finally:
        controller.stop()


DESIGN = """
name = "full-disk"
question = "Does a run on a full disk lose anything?"
profile = "llamacpp-cpu"

[[arms]]
name = "one"
knobs = {{ threads = 1 }}

[[arms]]
name = "two"
knobs = {{ threads = 2 }}

[design]
kind = "blocks"
blocks = 1

[workload]
name = "{workload}"
mode = "full"

[measure]
name = "total_replay_time"

[rule]
test = "sign"
treatment = "two"
control = "one"
direction = "lower"

[failure]
action = "retry"
max_retries = 1  # the cell cut short by the full disk is an interrupted attempt (runner.py): one retry for it
"""


@pytest.mark.timeout(900)
def test_an_experiment_on_a_disk_that_fills_up_stops_and_resumes_once_freed(frank_cli, disk, tmp_path):
    from frank.workloads.replay import read_records

    design = tmp_path / "design.toml"
    design.write_text(DESIGN.format(workload=workload(tmp_path / "wl")))
    reg = frank_cli("experiment", "register", str(design), "--json", timeout=120)
    assert reg.returncode == 0, reg.stderr
    run_id = json.loads(reg.stdout)["run_id"]
    folder = next((disk / "home").rglob(f"experiments/{run_id}"))
    journal = folder / "journal.jsonl"
    run = frank_cli.popen("experiment", "run", run_id, stderr=open(tmp_path / "run.err", "w"))
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not any(e["event"] == "cell_done" for e in jsonl.read(journal)):
            time.sleep(0.05)
        filler = fill(disk)  # the disk fills up under the running experiment, after its first cell
        run.wait(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    stopped = (tmp_path / "run.err").read_text()
    assert run.returncode != 0 and "No space left on device" in stopped, stopped[-3000:]
    events = jsonl.read(journal)  # whole: a damaged line would raise here
    filler.unlink()
    resumed = frank_cli("experiment", "run", run_id, "--json", timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = jsonl.read(journal)
    assert after[: len(events)] == events  # nothing recorded before the disk filled was lost
    done = [e for e in after if e["event"] == "cell_done"]
    assert sorted(e["slot"] for e in done) == [0, 1], done  # each cell done once
    for cell in done:  # every request of each cell recorded once
        records = read_records(Path(cell["dir"]) / "1.jsonl")
        assert [r["id"] for r in records] == [f"r{i:02d}" for i in range(REQUESTS)], cell["dir"]
    report = json.loads(frank_cli("experiment", "report", run_id, "--json", timeout=120).stdout)
    guards = {g["name"]: g["status"] for g in report["guards"]}
    assert guards.get("no_failed_requests") == "pass", report["guards"]
