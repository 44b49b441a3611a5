"""inspect-ai's own tools in the episodes' sandbox (frank-bwrap), in the agent venv: bash, python and the text
editor (its helper server injected into the sandbox's private /var/tmp) act in the episode's workspace,
which outlives the sample for the grader. The tools are called directly through inspect's sandbox API
(no model): what a model's tool call would run. From inside, the project, the hidden answers, the graders,
another draw's workspace and the network are out of reach, and no process of the sandbox outlives it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from frank.episodes.harness import agent_python, offline_env
from frank.episodes.sandbox import prepare_workspace

REPO = Path(__file__).resolve().parents[2]

TOOLS_SCRIPT = r"""
import asyncio, json, sys
from inspect_ai.tool import bash, python, text_editor
from inspect_ai.util._sandbox.context import sandbox_default_context_var, sandbox_environments_context_var
from frank.episodes.inspect_sandbox import BwrapSandbox

async def main(ws):
    envs = await BwrapSandbox.sample_init("t", ws, {})
    sandbox_environments_context_var.set(envs)
    sandbox_default_context_var.set("default")
    out = {}
    try:
        out["bash"] = await bash(timeout=60)("pwd && id -u && echo from-bash > b.txt")
        out["python"] = await python(timeout=60)("open('p.txt', 'w').write('from-python')")
        out["create"] = await text_editor()(command="create", path="/workspace/e.txt", file_text="from-editor\n")
        out["replace"] = await text_editor()(command="str_replace", path="/workspace/e.txt",
                                             old_str="from-editor", new_str="edited")
        out["view"] = await text_editor()(command="view", path="/workspace/e.txt")
        await envs["default"].write_file("w/api.txt", "through write_file")
        out["read"] = await envs["default"].read_file("w/api.txt")
        # a process the agent leaves behind, detached from its shell
        out["daemon"] = await bash(timeout=60)("setsid sleep 600 >/dev/null 2>&1 < /dev/null & echo started")
        out["pids"] = envs["default"].sandbox.processes()
    finally:
        await BwrapSandbox.sample_cleanup("t", ws, envs, False)
    out["left"] = envs["default"].sandbox.processes()
    print(json.dumps(out))

asyncio.run(main(sys.argv[1]))
"""


def _agent(script: str, *args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(agent_python()), "-c", script, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env=offline_env(tmp_path / "logs"),
    )


def test_inspect_tools_act_in_the_workspace_and_nothing_outlives_the_sample(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "given.txt").write_text("task file\n")
    prepare_workspace(ws)
    result = _agent(TOOLS_SCRIPT, str(ws), tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["bash"].splitlines() == ["/workspace", "65534"]
    assert "edited" in out["view"] and out["read"] == "through write_file"
    # nothing else: the text editor's helper (inspect's sandbox-tools) lives in the sandbox's own /var/tmp
    assert sorted(p.name for p in ws.iterdir()) == ["b.txt", "e.txt", "given.txt", "p.txt", "w"]
    assert (ws / "b.txt").read_text() == "from-bash\n"
    assert (ws / "p.txt").read_text() == "from-python"
    assert (ws / "e.txt").read_text() == "edited\n"
    assert len(out["pids"]) >= 3  # the holder, the helper server, the detached sleep
    assert out["left"] == []
    assert not [p for p in _host_pids_running("sleep 600")], "a process of the sandbox outlived it"


def _host_pids_running(fragment: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if fragment in cmd and "pytest" not in cmd:
                found.append(int(proc.name))
    return found


PROBE_SCRIPT = r"""
import asyncio, json, sys
from frank.episodes.inspect_sandbox import BwrapSandbox

async def main(ws, secrets):
    envs = await BwrapSandbox.sample_init("t", ws, {})
    sb = envs["default"]
    out = {}
    try:
        for name, path in json.loads(secrets).items():
            r = await sb.exec(["cat", path])
            out[name] = [r.returncode, r.stdout[:200], r.stderr[:200]]
        r = await sb.exec(["python3", "-c", "import os, sys; print(os.environ.get('PYTHONPATH')); print(sys.path)"])
        out["env"] = r.stdout
        r = await sb.exec(["python3", "-c",
            "import socket\nfor host, port in (('127.0.0.1', 22), ('10.0.0.1', 80), ('1.1.1.1', 443)):\n"
            "    try:\n        socket.create_connection((host, port), timeout=3); print('connected', host)\n"
            "    except OSError as e:\n        print('refused', host, e.errno)\n"])
        out["net"] = r.stdout
        r = await sb.exec(["sh", "-c", "ls /; ls /work /root 2>&1; cat /etc/shadow 2>&1"])
        out["ls"] = r.stdout + r.stderr
    finally:
        await BwrapSandbox.sample_cleanup("t", ws, envs, False)
    print(json.dumps(out))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_from_inside_the_answers_graders_other_draws_project_and_network_are_out_of_reach(tmp_path):
    from frank.episodes.suite import load_suite
    from frank.episodes.tasks import answer_path, materialize

    suite = load_suite("w01-mini")
    task = suite.task("trace-fault")
    run = tmp_path / "run"
    ws = run / "workspaces" / "d2-trace-fault"
    other = run / "workspaces" / "d1-trace-fault"
    materialize(task, 7, suite.scale, ws, answer_path(run, "d2-trace-fault"))
    materialize(task, 8, suite.scale, other, answer_path(run, "d1-trace-fault"))
    (other / "answer.json").write_text('{"solved": "in draw 1"}')
    prepare_workspace(ws)
    secrets = {
        "answer": str(answer_path(run, "d2-trace-fault")),
        "answer_beside": "../../answers/d2-trace-fault.expected.json",
        "grader": str(task.grader),
        "other_draw": str(other / "answer.json"),
        "other_draw_relative": "../d1-trace-fault/answer.json",
        "project": str(REPO / "frank" / "episodes" / "tasks.py"),
        "run_file": str(run / "run.json"),
    }
    result = _agent(PROBE_SCRIPT, str(ws), json.dumps(secrets), tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    for name in secrets:
        code, stdout, stderr = out[name]
        assert code != 0 and stdout == "" and "No such file or directory" in stderr, (name, out[name])
    assert out["env"].splitlines()[0] == "None" and str(REPO) not in out["env"]
    assert out["net"].splitlines() == ["refused 127.0.0.1 111", "refused 10.0.0.1 101", "refused 1.1.1.1 101"]
    listing = out["ls"]
    assert "workspace" in listing and "No such file or directory" in listing  # /work is not there
    assert "cat: /etc/shadow: No such file or directory" in listing
