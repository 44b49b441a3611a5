"""Graders, reference solutions and adversarial attempts: the one place a finished workspace is judged.

A grader is a program run with frank's Python (`python -I`) in the finished workspace (its working
directory), with the task's hidden answer file as its one argument (absent for a fixture task without
one). It never runs the agent's code itself: frank.episodes.judge runs it in a sandboxed child and reads
back plain data. Its verdict is the LAST line of its standard output, a JSON object `{"pass": true|false,
"detail": "..."}`, and it exits 0. Anything else (a traceback, another exit status, no verdict, running
past the task's `grader_timeout_s`) is an `error`: a fault of the grader, neither pass nor fail.

A reference solution (a program run in the workspace, inside the sandbox as an agent's code would be,
or a folder copied over it) exists only to prove the grader: `check_references` grades every task's
reference (pass expected), its untouched workspace (fail expected) and each of its shipped adversarial
attempts (programs that try to pass without doing the task, run in the sandbox like an agent: fail
expected, for the reason named on the attempt's `# expect:` line).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from frank import readfile
from frank.episodes import sandbox
from frank.episodes.suite import Suite, TaskSpec
from frank.episodes.tasks import answer_path, draw_seed, materialize, run_secret

OUTCOMES = ("pass", "fail", "error")


@dataclass(frozen=True)
class Verdict:
    outcome: str  # pass | fail | error
    detail: str
    seconds: float


FRANK_ROOT = Path(__file__).resolve().parents[2]
# the grader runs with `python -I` (neither the workspace, its working directory, nor the environment adds to
# its imports) and imports the frank that runs it: this tree, first on its path
LAUNCH = (
    "import runpy, sys; sys.path.insert(0, sys.argv[1]); del sys.argv[:2]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def _python_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def shipped_bytecode(workspace: Path) -> str | None:
    """The first bytecode in the workspace (a `__pycache__` folder, a .pyc or .pyo file), relative to it.
    Plain `python` would run it in place of the source beside it (a forged one stamped with the source's
    mtime and size) or of a deleted source, so the graders, which judge the sources, refuse it."""
    for dirpath, dirnames, filenames in os.walk(workspace):  # links are not followed
        for name in sorted(dirnames) + sorted(filenames):
            if name == "__pycache__" or name.endswith(sandbox.BYTECODE_SUFFIXES):
                return os.path.relpath(os.path.join(dirpath, name), workspace)
    return None


def run_grader(task: TaskSpec, workspace: Path, expected: Path | None) -> Verdict:
    forged = shipped_bytecode(workspace)
    if forged is not None:
        return Verdict(
            "fail", f"the workspace ships bytecode ({forged}): python would run it, not the sources judged", 0.0
        )
    argv = [sys.executable, "-I", "-c", LAUNCH, str(FRANK_ROOT), str(task.grader)]
    argv += [str(expected)] if expected is not None else []
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=workspace,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_python_env(),
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # at the time limit its whole group goes (its sandboxes die with it)
        )
    except OSError as exc:
        return Verdict("error", f"grader could not start: {exc}", time.perf_counter() - started)
    try:
        stdout, stderr = proc.communicate(timeout=task.grader_timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return Verdict("error", f"grader ran past {task.grader_timeout_s} s", time.perf_counter() - started)
    seconds = time.perf_counter() - started
    lines = [line for line in stdout.splitlines() if line.strip()]
    if proc.returncode != 0:
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        return Verdict("error", f"grader exited {proc.returncode}: {tail[:300]}", seconds)
    try:
        verdict = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        verdict = None
    if not isinstance(verdict, dict) or not isinstance(verdict.get("pass"), bool):
        return Verdict("error", 'grader printed no verdict (last line {"pass": true|false, ...})', seconds)
    return Verdict("pass" if verdict["pass"] else "fail", str(verdict.get("detail", ""))[:500], seconds)


def run_as_agent(program: Path, workspace: Path, timeout_s: int, *, ship_bytecode: bool = False) -> str | None:
    """Run a program in the workspace as an agent's code runs: inside the sandbox, as uid 65534, the
    workspace writable. `ship_bytecode`: the bytecode it writes is kept (an adversarial attempt hands the
    grader a workspace as anyone could; it writes none of its own imports' bytecode). Returns an error
    message if it failed."""
    done = sandbox.run_once(
        ["python3", "-I", *(["-B"] if ship_bytecode else []), "-"],
        workspace,
        input=readfile.read_bytes(program, readfile.TEXT),
        keep=True,
        keep_bytecode=ship_bytecode,
        wall_s=timeout_s,
        cpu_s=timeout_s,
    )
    if done.limit or done.returncode != 0:
        tail = (done.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1][:300]
        return f"{program.name} exited {done.returncode}{f' at the {done.limit} limit' if done.limit else ''}: {tail}"
    return None


def apply_reference(task: TaskSpec, workspace: Path) -> str | None:
    """Put the reference solution into the workspace; returns an error message if it failed."""
    ref = task.reference
    if ref.is_dir():
        shutil.copytree(ref, workspace, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.py[co]"))
        sandbox.prepare_workspace(workspace)
        return None
    return run_as_agent(ref, workspace, task.grader_timeout_s)


def attempts(task: TaskSpec) -> list[tuple[Path, str]]:
    """The task's shipped adversarial attempts and the reason each must fail for (its `# expect:` line)."""
    if task.adversarial is None:
        return []
    out = []
    for path in sorted(task.adversarial.glob("*.py")):
        lines = readfile.read_text(path, readfile.TEXT).splitlines()
        expect = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("# expect:")), "")
        out.append((path, expect))
    return out


@dataclass(frozen=True)
class AttemptCheck:
    attempt: str
    outcome: str  # fail expected
    detail: str
    expect: str  # the reason it must fail for: a part of `detail`

    @property
    def ok(self) -> bool:
        return self.outcome == "fail" and self.expect in self.detail


@dataclass(frozen=True)
class ReferenceCheck:
    task: str
    reference: str  # the grader's outcome on the reference solution (pass expected)
    reference_detail: str
    untouched: str  # the grader's outcome on the untouched workspace (fail expected)
    untouched_detail: str
    workspace_bytes: int
    adversarial: tuple[AttemptCheck, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.reference == "pass" and self.untouched == "fail" and all(a.ok for a in self.adversarial)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["adversarial"] = [{**asdict(a), "ok": a.ok} for a in self.adversarial]
        return {**out, "ok": self.ok}


def workspace_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _fresh(task: TaskSpec, suite: Suite, root: Path, name: str) -> tuple[Path, Path | None]:
    workspace = root / "workspaces" / f"{task.id}-{name}"
    seed = draw_seed(run_secret(root), suite.seed, 1)
    expected = materialize(task, seed, suite.scale, workspace, answer_path(root, f"{task.id}-{name}"))
    sandbox.prepare_workspace(workspace)
    return workspace, expected


def _attempt(task: TaskSpec, suite: Suite, root: Path, program: Path, expect: str) -> AttemptCheck:
    workspace, expected = _fresh(task, suite, root, f"attempt-{program.stem}")
    problem = run_as_agent(program, workspace, task.grader_timeout_s, ship_bytecode=True)
    verdict = Verdict("error", problem, 0.0) if problem else run_grader(task, workspace, expected)
    return AttemptCheck(program.stem, verdict.outcome, verdict.detail, expect)


def check_references(suite: Suite, scratch: Path | None = None) -> list[ReferenceCheck]:
    """Grade every task's untouched workspace, its reference solution and its adversarial attempts, each in
    a fresh workspace of draw 1 of a fresh secret (answers apart from the workspaces, as in a run)."""
    out: list[ReferenceCheck] = []
    with tempfile.TemporaryDirectory(prefix="frank-episodes-check-", dir=scratch) as tmp:
        root = Path(tmp)
        for task in suite.tasks:
            untouched_ws, expected = _fresh(task, suite, root, "untouched")
            size = workspace_bytes(untouched_ws)
            untouched = run_grader(task, untouched_ws, expected)
            ref_ws, expected = _fresh(task, suite, root, "reference")
            problem = apply_reference(task, ref_ws)
            reference = Verdict("error", problem, 0.0) if problem else run_grader(task, ref_ws, expected)
            tried = tuple(_attempt(task, suite, root, program, expect) for program, expect in attempts(task))
            out.append(
                ReferenceCheck(
                    task.id, reference.outcome, reference.detail, untouched.outcome, untouched.detail, size, tried
                )
            )
    return out
