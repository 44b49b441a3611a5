"""inspect-ai's own tools in the episodes' sandbox, in the agent venv: bash, python and the text editor (its
helper server injected outside the workspace) act in the episode's workspace, which outlives the sample for
the grader. The tools are called directly (no model): what a model's tool call would run."""

from __future__ import annotations

import subprocess
from pathlib import Path

from frank.episodes.harness import agent_python, offline_env

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import asyncio, json, sys
from pathlib import Path
from inspect_ai.tool import bash, python, text_editor
from inspect_ai.util._sandbox.context import sandbox_default_context_var, sandbox_environments_context_var
from frank.episodes.inspect_harness import WorkspaceSandbox

async def main(ws):
    envs = await WorkspaceSandbox.sample_init("t", ws, {})
    sandbox_environments_context_var.set(envs)
    sandbox_default_context_var.set("default")
    out = {}
    try:
        out["bash"] = await bash(timeout=60)("pwd && echo from-bash > b.txt")
        out["python"] = await python(timeout=60)("open('p.txt', 'w').write('from-python')")
        out["create"] = await text_editor()(command="create", path=str(Path(ws) / "e.txt"), file_text="from-editor\n")
        out["replace"] = await text_editor()(command="str_replace", path=str(Path(ws) / "e.txt"),
                                             old_str="from-editor", new_str="edited")
    finally:
        await WorkspaceSandbox.sample_cleanup("t", ws, envs, False)
    print(json.dumps(out))

asyncio.run(main(sys.argv[1]))
"""


def test_inspect_tools_act_in_the_workspace_and_it_outlives_the_sample(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "given.txt").write_text("task file\n")
    result = subprocess.run(
        [str(agent_python()), "-c", SCRIPT, str(ws)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env=offline_env(tmp_path / "logs"),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert str(ws) in result.stdout  # bash's working directory is the workspace
    # nothing else: the text editor's helper server (inspect's sandbox-tools) runs from outside the workspace
    assert sorted(p.name for p in ws.iterdir()) == ["b.txt", "e.txt", "given.txt", "p.txt"]
    assert (ws / "b.txt").read_text() == "from-bash\n"
    assert (ws / "p.txt").read_text() == "from-python"
    assert (ws / "e.txt").read_text() == "edited\n"
