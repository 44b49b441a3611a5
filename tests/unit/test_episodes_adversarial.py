"""The W01 graders against attempts that must not pass: each task's shipped adversarial attempts (cheats,
near misses, junk, hangs) run in the sandbox as an agent's code would, then the real grader judges them.
Every one must be `fail`, for the reason its `# expect:` line names; the reference must still pass and the
untouched workspace fail. A judged run looks, from inside, like the agent's own run; a correct solution
written differently passes."""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest

from frank.episodes.grade import attempts, check_references, run_as_agent, run_grader
from frank.episodes.judge import probe
from frank.episodes.sandbox import Sandbox, prepare_workspace, spawn_options
from frank.episodes.suite import load_suite
from frank.episodes.tasks import GENERATORS, answer_path, draw_seed, materialize, run_secret

SUITE = load_suite("w01-mini")


@pytest.mark.parametrize("task_id", list(GENERATORS))
def test_every_shipped_attempt_fails_for_its_reason(task_id):
    task = SUITE.task(task_id)
    shipped = attempts(task)
    assert len(shipped) >= 5 and all(expect for _, expect in shipped), shipped
    [check] = check_references(dataclasses.replace(SUITE, tasks=(task,)))
    assert (check.reference, check.untouched) == ("pass", "fail"), check
    assert [a.attempt for a in check.adversarial] == [p.stem for p, _ in shipped]
    for attempt in check.adversarial:
        assert attempt.outcome == "fail", attempt
        assert attempt.expect in attempt.detail, attempt


VIEW = r"""
import os, resource, socket, stat, sys


def _status(key):
    return next(line.split(":", 1)[1].strip() for line in open("/proc/self/status") if line.startswith(key + ":"))


def _cmdline(pid):
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
    except OSError:
        return "?"


VIEW = {
    "flags": repr(sys.flags), "argv": sys.argv, "path": sys.path, "env": dict(os.environ), "cwd": os.getcwd(),
    "writable": os.access(os.getcwd(), os.W_OK), "bytecode": [sys.dont_write_bytecode, sys.pycache_prefix],
    "fds": sorted(os.listdir("/proc/self/fd")), "ppid": os.getppid(), "host": socket.gethostname(),
    "stdio": [stat.S_IFMT(os.fstat(fd).st_mode) for fd in (0, 1, 2)],
    "out_is_err": os.path.samestat(os.fstat(1), os.fstat(2)),
    "limits": {n: list(resource.getrlimit(getattr(resource, n))) for n in dir(resource) if n.startswith("RLIMIT_")},
    "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getgroups(), os.umask(0o022)],
    "status": [_status(k) for k in ("Seccomp", "NoNewPrivs", "CapEff", "CapBnd")],
    "mounts": sorted(" ".join(l.split()[3:6]) for l in open("/proc/self/mountinfo")),
    "processes": sorted(_cmdline(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()),
}


def view():
    return VIEW
"""


def test_a_judged_run_is_a_users_run_from_inside(tmp_path):
    """What the agent's code can see of its run, from the moment it is imported: the grader's probe (the
    judged run) and the agent's own python tool (inspect's `bash --login -c "python3 -"` in a fresh sandbox)
    give it the same flags, argv, path, environment, working directory and its writability, bytecode
    settings, descriptors, limits, ids, filter, mounts and processes: nothing to behave differently on."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "spy.py").write_text(VIEW)
    prepare_workspace(ws)
    judged = probe("from spy import view\n_emit(_call(view))\n", None, workspace=ws)["value"]
    box = Sandbox(ws, keep=False)
    try:
        argv = box.command(["bash", "--login", "-c", "python3 -"])
        code = "import json, spy\nprint(json.dumps(spy.view()))\n"
        own = subprocess.run(argv, input=code, capture_output=True, text=True, timeout=60, **spawn_options())
    finally:
        box.close()
    assert own.returncode == 0, own.stderr
    users = json.loads(own.stdout)
    assert judged == users
    # what told the old judged run apart: -I -B, a read-only workspace, the workspace last on the path,
    # a pycache prefix, stdout sent to stderr
    assert (judged["argv"], judged["path"][0], judged["writable"]) == (["-"], "", True)
    assert judged["bytecode"] == [False, None] and not judged["out_is_err"] and "isolated=0" in judged["flags"]
    assert judged["status"][:2] == ["2", "1"]  # the seccomp filter and no_new_privs, in both


# Correct solutions written differently from the references: other names and algorithms, CRLF line endings,
# tabs, another layout, an encoding declaration. Each must pass.
ALTERNATIVES = {
    "fix-failing-test": r"""
from pathlib import Path
core = Path("ledger/core.py")
text = core.read_text()
start = text.index("def moving_sum")
end = text.index("def running_total")
fixed = '''def moving_sum(values, window):
	\"\"\"Sliding sums.\"\"\"
	if window < 1:
		raise ValueError("window must be positive")
	out = []
	acc = sum(values[:window])
	if len(values) >= window:
		out.append(acc)
	for i in range(window, len(values)):
		acc += values[i] - values[i - window]
		out.append(acc)
	return out


'''
core.write_bytes((text[:start] + fixed + text[end:]).replace("\n", "\r\n").encode())
""",
    "rename-symbol": r"""
import io, tokenize
from pathlib import Path
for path in Path("src").rglob("*.py"):
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    renamed = [t._replace(string="load_record") if t.type == tokenize.NAME and t.string == "fetch_record" else t
               for t in tokens]
    text = "# -*- coding: utf-8 -*-\n# renamed with tokenize\n\n" + tokenize.untokenize(renamed)
    path.write_bytes(text.replace("\n", "\r\n").encode())
""",
    "implement-spec": r"""
from pathlib import Path
Path("timeutil/durations.py").write_bytes('''SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
ORDER = "dhms"


def parse_duration(text):
    body = text.strip(" ")
    if not body:
        raise ValueError("empty")
    total, last, pos = 0, -1, 0
    while pos < len(body):
        start = pos
        while pos < len(body) and body[pos] in "0123456789":
            pos += 1
        if pos == start or pos == len(body) or body[pos].lower() not in ORDER:
            raise ValueError(text)
        rank = ORDER.index(body[pos].lower())
        if rank <= last:
            raise ValueError(text)
        total, last, pos = total + int(body[start:pos]) * SECONDS[ORDER[rank]], rank, pos + 1
        while pos < len(body) and body[pos] == " ":
            pos += 1
    return total
'''.replace("\n", "\r\n").encode())
""",
}


@pytest.mark.parametrize("task_id", list(ALTERNATIVES))
def test_a_correct_solution_written_differently_passes(task_id, tmp_path):
    task = SUITE.task(task_id)
    ws, program = tmp_path / "ws", tmp_path / "solve.py"
    expected = materialize(
        task, draw_seed(run_secret(tmp_path), SUITE.seed, 1), SUITE.scale, ws, answer_path(tmp_path, "x")
    )
    prepare_workspace(ws)
    program.write_text(ALTERNATIVES[task_id])
    assert run_as_agent(program, ws, 60) is None
    verdict = run_grader(task, ws, expected)
    assert verdict.outcome == "pass", verdict


def test_the_changed_return_attempt_changes_the_program_in_every_draw(tmp_path):
    """An attempt must do what it claims in every draw, or it passes for the wrong reason: change_a_return
    once changed nothing in a draw whose first module had no literal return (a correct rename, graded pass)."""
    import re
    import subprocess
    import sys

    from frank.episodes.tasks import gen_rename_symbol

    attempt = next(p for p, _ in attempts(SUITE.task("rename-symbol")) if p.stem == "change_a_return")
    for seed in range(40):
        folder = tmp_path / str(seed)
        files = gen_rename_symbol(seed, SUITE.scale).files
        for rel, text in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text)
        subprocess.run([sys.executable, "-I", str(attempt)], cwd=folder, check=True, timeout=60)
        renamed = {rel: re.sub(r"\bfetch_record\b", "load_record", text) for rel, text in files.items()}
        beyond = [rel for rel in renamed if rel.endswith(".py") and (folder / rel).read_text() != renamed[rel]]
        assert len(beyond) == 1, (seed, beyond)  # one view changed beyond the rename, in every draw


def test_forged_bytecode_runs_the_old_program_and_is_refused(tmp_path):
    """The forged-bytecode attempt is a real forgery: its sources are a correct rename, yet plain `python`
    in the shipped workspace runs the old program from the stamped bytecode. The grader judges what is
    shipped, so it refuses the bytecode, naming it; the same sources without it pass."""
    import shutil
    import sys

    task = SUITE.task("rename-symbol")
    ws = tmp_path / "ws"
    expected = materialize(
        task, draw_seed(run_secret(tmp_path), SUITE.seed, 1), SUITE.scale, ws, answer_path(tmp_path, "x")
    )
    prepare_workspace(ws)
    attempt = next(p for p, _ in attempts(task) if p.stem == "forged_bytecode")
    assert run_as_agent(attempt, ws, 60, ship_bytecode=True) is None
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": "src", "PYTHONDONTWRITEBYTECODE": "1"}
    ran = subprocess.run(
        [sys.executable, "-m", "shop.main"], cwd=ws, env=env, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode != 0 and "cannot import name 'load_record'" in ran.stderr, ran  # the old store ran
    verdict = run_grader(task, ws, expected)
    assert verdict.outcome == "fail" and "ships bytecode (src/shop/__pycache__" in verdict.detail, verdict
    for cache in ws.rglob("__pycache__"):
        shutil.rmtree(cache)
    assert run_grader(task, ws, expected).outcome == "pass"  # the sources alone are a correct rename
