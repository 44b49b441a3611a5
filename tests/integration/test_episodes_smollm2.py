"""Live episodes on a real model that says something: SmolLM2-135M on llama.cpp (`llamacpp-cpu`, ready in
seconds), whose profile declares constrained tool calls. Every answer is held to the JSON schema of the
task's tools by the engine's grammar; the model's calls run with inspect's real tools in the sandbox, and
the grader judges the workspace. One engine for the module, in its own FRANK_HOME."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frank.episodes.runner import read_jsonl
from frank.episodes.suite import BUILTIN_DIR
from frank.workloads.format import check_workload

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[2]
TASKS = ("trace-fault", "rename-symbol")  # two of w01-mini's six: a log to search, a package to edit
SAMPLING_SEED = 8


@pytest.fixture(scope="module")
def smollm2_llamacpp(frank_cli, tmp_path_factory):
    home = tmp_path_factory.mktemp("smollm2-episodes-home")
    started = frank_cli("engine", "start", "--profile", "llamacpp-cpu", "--json", home=home, timeout=900)
    assert started.returncode == 0, started.stderr
    yield home
    stopped = frank_cli("engine", "stop", "--json", home=home, timeout=900)
    assert stopped.returncode == 0, stopped.stderr


def _suite(tmp_path: Path) -> Path:
    """w01-mini's manifest cut to TASKS, beside a copy of its files (a suite names only files inside its folder)."""
    import shutil

    text = (BUILTIN_DIR / "w01-mini.toml").read_text()
    head, *blocks = text.split("[[tasks]]")
    kept = [b for b in blocks if any(f'id = "{t}"' in b for t in TASKS)]
    body = head.replace('name = "w01-mini"', 'name = "w01-mini-two"') + "".join(f"[[tasks]]{b}" for b in kept)
    shutil.copytree(BUILTIN_DIR / "w01", tmp_path / "w01")
    path = tmp_path / "w01-mini-two.toml"
    path.write_text(body)
    return path


def test_smollm2_on_llamacpp_makes_real_tool_calls_that_run_in_the_sandbox(frank_cli, smollm2_llamacpp, tmp_path):
    # SmolLM2 samples at the seed's temperature 1.0; one sampling seed on every request makes the draw
    # repeatable on this machine (unseeded, a clean-clone CI run once made no call in these two tasks)
    out = frank_cli(
        "episodes",
        "run",
        str(_suite(tmp_path)),
        "--draws",
        "1",
        "--sampling-seed",
        str(SAMPLING_SEED),
        "--json",
        home=smollm2_llamacpp,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    assert report["status"] == "finished" and report["episodes_done"] == len(TASKS)
    assert report["tool_call_modes"] == ["schema"]
    assert report["tool_calls"] > 0, report["episodes"]
    folder = Path(report["folder"])
    results = read_jsonl(folder / "results.jsonl")
    for r in results:
        assert r["outcome"] in ("pass", "fail"), r  # graded from the workspace: the harness did not fail
        assert r["tool_call_mode"] == "schema"
        assert r["calls_in_sandbox"] == r["tool_calls"], r  # every call the model made ran in the sandbox
        assert len(r["invalid_reasons"]) == min(r["invalid_answers"], 5)  # the record keeps the first five reasons
        assert r["turns"] == r["requests"] == r["recorded_requests"] <= 3
        # every request was held to SmolLM2's 8192-token context with room for its answer, by a bound the
        # engine's own count of the prompt tokens stays under
        assert 0 < r["longest_prompt_tokens"] <= r["longest_prompt_bound"] <= 8192 - 48
    # what went to the engine: no tools, a response_format holding exactly the task's tools and submit
    workload, errors = check_workload(Path(report["recording"]), keep=True)
    assert errors == []
    bodies = [r.body for draw in workload.draws for r in workload.requests[draw.name]]
    assert len(bodies) == sum(r["requests"] for r in results)
    for body in bodies:
        assert "tools" not in body
        assert body["seed"] == SAMPLING_SEED
        choices = body["response_format"]["json_schema"]["schema"]["anyOf"]
        assert sorted(c["properties"]["tool"]["enum"][0] for c in choices) == [
            "bash",
            "python",
            "submit",
            "text_editor",
        ]
