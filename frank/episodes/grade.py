"""Graders and reference solutions: the one place a finished workspace is judged.

A grader is a program run in the finished workspace (its working directory), with the task's hidden
answer file as its one argument (absent for a fixture task without one). Its verdict is the LAST line of
its standard output, a JSON object `{"pass": true|false, "detail": "..."}`, and it exits 0. Anything else
(a traceback, another exit status, no verdict, running past the task's `grader_timeout_s`) is an `error`:
neither pass nor fail, and the run goes on.

A reference solution (a program run in the workspace, or a folder copied over it) exists only to prove
the grader: `check_references` grades every task's reference (pass expected) and its untouched workspace
(fail expected).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from frank.episodes.suite import Suite, TaskSpec
from frank.episodes.tasks import materialize

OUTCOMES = ("pass", "fail", "error")


@dataclass(frozen=True)
class Verdict:
    outcome: str  # pass | fail | error
    detail: str
    seconds: float


def _python_env() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_grader(task: TaskSpec, workspace: Path, expected: Path | None) -> Verdict:
    argv = [sys.executable, str(task.grader)] + ([str(expected)] if expected is not None else [])
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            argv,
            cwd=workspace,
            capture_output=True,
            text=True,
            timeout=task.grader_timeout_s,
            env=_python_env(),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return Verdict("error", f"grader ran past {task.grader_timeout_s} s", time.perf_counter() - started)
    except OSError as exc:
        return Verdict("error", f"grader could not start: {exc}", time.perf_counter() - started)
    seconds = time.perf_counter() - started
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Verdict("error", f"grader exited {proc.returncode}: {tail[:300]}", seconds)
    try:
        verdict = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        verdict = None
    if not isinstance(verdict, dict) or not isinstance(verdict.get("pass"), bool):
        return Verdict("error", 'grader printed no verdict (last line {"pass": true|false, ...})', seconds)
    return Verdict("pass" if verdict["pass"] else "fail", str(verdict.get("detail", ""))[:500], seconds)


def apply_reference(task: TaskSpec, workspace: Path) -> str | None:
    """Put the reference solution into the workspace; returns an error message if it failed."""
    ref = task.reference
    if ref.is_dir():
        shutil.copytree(ref, workspace, dirs_exist_ok=True)
        return None
    proc = subprocess.run(
        [sys.executable, str(ref)],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=task.grader_timeout_s,
        env=_python_env(),
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        return f"reference exited {proc.returncode}: {(proc.stderr.strip().splitlines() or ['?'])[-1][:300]}"
    return None


@dataclass(frozen=True)
class ReferenceCheck:
    task: str
    reference: str  # the grader's outcome on the reference solution (pass expected)
    reference_detail: str
    untouched: str  # the grader's outcome on the untouched workspace (fail expected)
    untouched_detail: str
    workspace_bytes: int

    @property
    def ok(self) -> bool:
        return self.reference == "pass" and self.untouched == "fail"

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def workspace_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def check_references(suite: Suite, scratch: Path | None = None) -> list[ReferenceCheck]:
    """Grade every task's untouched workspace and its reference solution, each in a fresh workspace."""
    out: list[ReferenceCheck] = []
    with tempfile.TemporaryDirectory(prefix="frank-episodes-check-", dir=scratch) as tmp:
        for task in suite.tasks:
            untouched_ws = Path(tmp) / f"{task.id}-untouched"
            expected = materialize(task, suite.seed, suite.scale, untouched_ws)
            size = workspace_bytes(untouched_ws)
            untouched = run_grader(task, untouched_ws, expected)
            ref_ws = Path(tmp) / f"{task.id}-reference"
            expected = materialize(task, suite.seed, suite.scale, ref_ws)
            problem = apply_reference(task, ref_ws)
            reference = Verdict("error", problem, 0.0) if problem else run_grader(task, ref_ws, expected)
            out.append(
                ReferenceCheck(task.id, reference.outcome, reference.detail, untouched.outcome, untouched.detail, size)
            )
    return out
