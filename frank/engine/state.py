"""The engine's files in the state dir: what was started, by whom, and how it ended.

Each of the four JSON files is a frozen record of frank.engine.records (its one reader and writer, shared
with the supervisor):
- engine.json   EngineRecord, the controller's: profile, knobs, host/port/url, control token, pgid,
                start time, ready seconds, log path, argv and environment (0600: it holds the token)
- engine.spec.json  SupervisorSpec, the controller's: what the supervisor runs and where it writes
- engine.run.json   RunRecord, the supervisor's: its pid and the server's pid
- engine.exit.json  ExitRecord, the supervisor's when the server ends: exit code or signal
- engine.stop       marker: a stop was requested (so the exit is not a crash)
- knobs-PROFILE.json  knob values chosen while no engine ran, used by the next start
- knob-changes.jsonl  every knob flip: when, old, new, and whether live or by restart
- starts.json         each profile's last start-to-ready seconds (what a console offering a start expects)
- logs/engine.log     the server's output (rotated at each start, 5 kept)
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frank import jsonl, readfile
from frank.engine import records
from frank.engine.records import EngineRecord, ExitRecord, RunRecord, SupervisorSpec
from frank.errors import FrankError, WriteError
from frank.paths import private_dir, write_private

LOGS_KEPT = 5


@dataclass(frozen=True)
class StateFiles:
    root: Path

    @property
    def record(self) -> Path:
        return self.root / "engine.json"

    @property
    def run(self) -> Path:
        return self.root / "engine.run.json"

    @property
    def exit(self) -> Path:
        return self.root / "engine.exit.json"

    @property
    def stop_marker(self) -> Path:
        return self.root / "engine.stop"

    @property
    def spec(self) -> Path:
        return self.root / "engine.spec.json"

    @property
    def knob_changes(self) -> Path:
        return self.root / "knob-changes.jsonl"

    @property
    def starts(self) -> Path:
        return self.root / "starts.json"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"  # created by rotate_logs: a reader creates nothing

    @property
    def log(self) -> Path:
        return self.log_dir / "engine.log"

    def saved_knobs_path(self, profile: str) -> Path:
        return self.root / f"knobs-{profile}.json"

    # -- the state records (frank.engine.records) -----------------------------------------------------
    def read_record(self) -> EngineRecord | None:
        return records.read(self.record, EngineRecord)

    def read_run(self) -> RunRecord | None:
        return records.read(self.run, RunRecord)

    def read_exit(self) -> ExitRecord | None:
        return records.read(self.exit, ExitRecord)

    def write_record(self, record: EngineRecord) -> None:
        private_dir(self.root)
        _written(self.record, record)

    def write_spec(self, spec: SupervisorSpec) -> None:
        private_dir(self.root)
        _written(self.spec, spec)

    # -- other json files (saved knobs) ---------------------------------------------------------------
    @staticmethod
    def read_json(path: Path) -> dict[str, Any] | None:
        """The file's object, or None when it is missing or torn (a torn state file is not trusted)."""
        try:
            return readfile.read_object(path)
        except FrankError:
            return None

    @staticmethod
    def write_json(path: Path, payload: dict[str, Any]) -> None:
        private_dir(path.parent)
        write_private(path, json.dumps(payload, indent=2, sort_keys=True))

    def clear_run(self) -> None:
        """Forget the last engine (record, pids, exit, stop marker): the next status is `stopped`."""
        for path in (self.record, self.run, self.exit, self.stop_marker, self.spec):
            path.unlink(missing_ok=True)

    def note_ready(self, profile: str, seconds: float) -> None:
        """Keep the profile's last start-to-ready time (its record goes at the stop)."""
        known = self.read_json(self.starts) or {}
        self.write_json(self.starts, {**known, profile: seconds})

    def last_ready(self, profile: str) -> float | None:
        """The profile's last start-to-ready seconds here, or None (never started here)."""
        value = (self.read_json(self.starts) or {}).get(profile)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def append_knob_change(self, change: dict[str, Any]) -> None:
        private_dir(self.root)
        jsonl.append(self.knob_changes, {"at": time.time(), **change}, sort_keys=True)

    def rotate_logs(self) -> Path:
        """Shift engine.log -> engine.log.1 -> ... (LOGS_KEPT kept) and return the fresh log path."""
        private_dir(self.log_dir)
        log = self.log
        for index in range(LOGS_KEPT - 1, 0, -1):
            older = log.with_name(f"engine.log.{index}")
            if older.exists():
                older.replace(log.with_name(f"engine.log.{index + 1}"))
        if log.exists():
            log.replace(log.with_name("engine.log.1"))
        return log


def tail_lines(path: Path, count: int, max_bytes: int = 1 << 20) -> list[str]:
    """The last `count` lines of a file, reading at most `max_bytes` from its end."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    return lines[-count:] if count > 0 else []


def _written(path: Path, record: EngineRecord | SupervisorSpec) -> None:
    """records.write (stdlib only, shared with the supervisor) with frank's error: a full disk names the file
    and keeps what it held."""
    try:
        records.write(path, record)
    except OSError as exc:
        raise WriteError(f"{path}: cannot write: {exc.strerror or exc} (what it held is kept)") from None
