"""The engine's state files as records (frank.engine.records): one reader and writer for the controller and
the supervisor, which must stay standard-library only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from frank.engine import records
from frank.engine.records import EngineRecord, ExitRecord, RunRecord


def test_a_record_reads_back_as_written_private(tmp_path: Path) -> None:
    path = tmp_path / "engine.json"
    record = EngineRecord(profile="tiny", knobs={"threads": 2}, port=8123, argv=["python", "-m", "x"])
    records.write(path, record)
    assert records.read(path, EngineRecord) == record
    assert os.stat(path).st_mode & 0o777 == 0o600  # it holds the control token


def test_torn_missing_or_foreign_files_read_as_none_and_new_keys_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "engine.run.json"
    assert records.read(path, RunRecord) is None  # missing
    path.write_text('{"supervisor_pid": 12')  # torn mid-write
    assert records.read(path, RunRecord) is None
    path.write_text("[1, 2]")  # not an object
    assert records.read(path, RunRecord) is None
    path.write_text(json.dumps({"server_pid": 5}))  # the supervisor's pid missing: not this record
    assert records.read(path, RunRecord) is None
    path.write_text(json.dumps({"supervisor_pid": 4, "server_pid": 5, "written_by": "a newer frank"}))
    assert records.read(path, RunRecord) == RunRecord(4, 5)


def test_one_wording_of_how_the_server_ended() -> None:
    assert ExitRecord(returncode=3).describe() == "exit code 3"
    assert ExitRecord(returncode=-9, signal="SIGKILL").describe() == "killed by SIGKILL"
    assert ExitRecord(spawn_error="No such file: /x").describe() == "the server could not be spawned: No such file: /x"
    assert ExitRecord(reason="the supervisor is gone").describe() == "the supervisor is gone"
    assert ExitRecord().describe() == "exit status unknown"


def test_the_supervisor_imports_the_standard_library_and_the_records_only() -> None:
    code = (
        "import json, sys, frank.engine.supervisor\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] not in sys.stdlib_module_names)))"
    )  # what the interpreter loads before any import (the editable install's finder, site's hooks) aside
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = {m for m in json.loads(out.stdout) if not m.startswith("_")}
    # the records read through the bounded reader, itself the standard library and frank.errors only
    records = {"frank.engine.records", "frank.readfile", "frank.errors"}
    assert loaded == {"frank", "frank.engine", "frank.engine.supervisor", *records}
