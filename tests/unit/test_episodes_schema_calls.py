"""Constrained tool calls (a profile's `tool_calls = "schema"`): the judge of an answer, in the agent venv.

The engine constrains each answer to the schema, so it cannot produce the answers below: these are the
attempts that must be refused, for the right reason, if an engine ever ignores the constraint. The second
test drives frank's whole schema agent loop in inspect with the real tools and the real sandbox; its model
is inspect's `mockllm` answering a fixed script, a stand-in named as such, and only for the faults a real
constrained engine cannot produce (the live test on llama.cpp is tests/integration/test_episodes_smollm2.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from frank.episodes.harness import agent_python, offline_env
from frank.episodes.sandbox import prepare_workspace

REPO = Path(__file__).resolve().parents[2]

BASH = '{"tool": "bash", "arguments": {"command": "ls"}}'
# (answer, tools granted, cut off, expected: a reason's fragment, or "ok")
CASES = [
    (BASH, ["bash"], False, "ok"),
    (
        '{"tool": "text_editor", "arguments": {"command": "view", "path": "/workspace/a.py"}}',
        ["text_editor"],
        False,
        "ok",
    ),
    ('{"tool": "submit", "arguments": {"answer": "done"}}', ["bash"], False, "ok"),
    ('{"tool": "python", "arguments": {"code": "print(1)"}}', ["bash"], False, "'python' is not granted"),
    ('{"tool": "shell", "arguments": {"command": "ls"}}', ["bash", "python"], False, "'shell' is not granted"),
    ('{"tool": ["bash"], "arguments": {"command": "ls"}}', ["bash"], False, "is not granted"),
    ('{"tool": "bash", "arguments": {"cmd": "ls"}}', ["bash"], False, "fail its schema"),
    ('{"tool": "bash", "arguments": {"command": 7}}', ["bash"], False, "fail its schema at command"),
    ('{"tool": "bash", "arguments": {"command": "ls", "timeout": 1}}', ["bash"], False, "fail its schema"),
    ('{"tool": "text_editor", "arguments": {"command": "delete", "path": "a"}}', ["text_editor"], False, "at command"),
    ('{"tool": "submit", "arguments": {}}', ["bash"], False, "fail its schema"),
    ('{"tool": "bash", "arguments": "ls"}', ["bash"], False, "are not an object"),
    ('{"tool": "bash", "arguments": {"command": "ls"}, "note": "x"}', ["bash"], False, "expected exactly"),
    ('{"tool": "python", "tool": "bash", "arguments": {"command": "ls"}}', ["bash"], False, "repeats the key 'tool'"),
    ('{"tool": "bash", "arguments": {"command": NaN}}', ["bash"], False, "NaN, which is not JSON"),
    ('[{"tool": "bash", "arguments": {"command": "ls"}}]', ["bash"], False, "not an object"),
    ("I will list the files with ls.", ["bash"], False, "is not JSON"),
    ('{"tool": "bash", "arguments": {"command": "cat da', ["bash"], True, "cut off at max_tokens"),
]

PARSE_LEVEL = {"repeats the key 'tool'", "NaN, which is not JSON"}

JUDGE_SCRIPT = r"""
import json, sys
from jsonschema import Draft7Validator
from inspect_ai.tool import bash, python, text_editor
from frank.episodes.schema_agent import tool_specs
from frank.episodes.schema_calls import RefusedAnswer, answer_schema, read_answer
TOOLS = {"bash": bash(timeout=5), "python": python(timeout=5), "text_editor": text_editor()}
out = []
for text, granted, cut_off, _ in json.loads(sys.argv[1]):
    specs = tool_specs([TOOLS[n] for n in granted])
    try:
        name, args = read_answer(text, specs, cut_off=cut_off)
        verdict = "ok"
    except RefusedAnswer as exc:
        verdict = exc.reason
    try:  # does the schema the engine enforces agree with the judge?
        schema_ok = Draft7Validator(answer_schema(specs)).is_valid(json.loads(text))
    except ValueError:
        schema_ok = False
    out.append([verdict, schema_ok])
print(json.dumps(out))
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


def test_answers_off_the_schema_or_naming_ungranted_tools_are_refused_for_the_right_reason(tmp_path):
    result = _agent(JUDGE_SCRIPT, json.dumps(CASES), tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    verdicts = json.loads(result.stdout.strip().splitlines()[-1])
    for (text, _granted, _, expect), (verdict, schema_ok) in zip(CASES, verdicts, strict=True):
        if expect == "ok":
            assert verdict == "ok" and schema_ok, (text, verdict)
        else:
            assert expect in verdict, (text, verdict)
            if expect not in PARSE_LEVEL:  # a schema judges parsed JSON: these are refused before it
                assert not schema_ok, f"the engine's schema admits an answer the judge refuses: {text}"


LOOP_SCRIPT = r"""
import json, sys
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from frank.episodes.inspect_harness import build_task, summarize
ws, log_dir = sys.argv[1], sys.argv[2]
script = [
    '{"tool": "python", "arguments": {"code": "open(\'by-python\', \'w\')"}}',  # not granted: bash only
    '{"tool": "bash", "arguments": {"command": "touch by-extra-arg", "timeout": 1}}',  # off bash's schema
    '{"tool": "bash", "arguments": {"command": "touch by-bash && id -u && pwd"}}',  # valid: runs
    '{"tool": "bash", "arguments": {"command": "seq 100000 103000"}}',  # 21 KB: cut to fit the next request
    '{"tool": "submit", "arguments": {"answer": "touched"}}',
]
def scripted(text):  # usage given, so that mockllm does not count tokens with tiktoken (a download)
    out = ModelOutput.from_content("mockllm/model", text)
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return out
model = get_model("mockllm/model", custom_outputs=[scripted(t) for t in script])
spec = {"task": "t", "instruction": "Touch a file.", "workspace": ws, "tools": ["bash"], "tool_timeout_s": 30,
        "system_prompt": "You work in a shell.", "tool_calls": "schema", "max_turns": 5, "max_tokens": 48,
        "context_tokens": 6000}
log = inspect_eval(build_task(spec), model=model, log_dir=log_dir, display="none", score=False,
                   turn_limit=5, log_realtime=False)[0]
out = summarize(log)
sample = log.samples[0]
out["results"] = [m.text for m in sample.messages if m.role == "tool"]
print(json.dumps(out))
"""


def test_the_schema_loop_runs_only_valid_calls_in_the_sandbox_and_counts_the_refused(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    prepare_workspace(ws)
    result = _agent(LOOP_SCRIPT, str(ws), str(tmp_path / "logs"), tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["error"] is None, out["error"]
    # the two refused answers ran nothing; the valid call ran in the sandbox as nobody, in /workspace
    assert sorted(p.name for p in ws.iterdir()) == ["by-bash"]
    assert out["results"][0] == "65534\n/workspace\n"
    assert out["tool_calls"] == out["calls_in_sandbox"] == 2
    assert out["invalid_answers"] == 2
    assert "'python' is not granted" in out["invalid_reasons"][0]
    assert "fail its schema" in out["invalid_reasons"][1]
    # the long output is cut, says so, and the request that carries it fits a 6000-token context with room
    # for its answer: at most one token per byte, plus the template's few tokens per message
    assert out["outputs_cut"] == 1
    assert "too long" in out["results"][1] and "100000" in out["results"][1]
    assert 4000 < out["longest_prompt_bound"] <= 6000 - 48
    assert out["submitted"] is True and out["limit"] is None
    assert out["turns"] == out["requests"] == 5
