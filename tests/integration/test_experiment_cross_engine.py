"""A registered experiment whose arms run different engine kinds, end to end on the cheapest real engines:
vLLM (embedded-cpu, the tiny model; about a minute to start) against llama.cpp (llamacpp-cpu, SmolLM2;
seconds), each arm one start running two draws of a one-task episode suite through the CLI. The runner
starts each arm's kind through the same controller; vLLM's draws get a fresh `cache_salt` each, llama.cpp's
a fresh engine start each (it has no per-request cache namespace). The report has per-draw totals and passes
for both arms, every rule evaluated. (The two arms serve different models: no fidelity rule; the body
design on one model is scripts/run_body_design.sh.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frank.engine.controller import EngineController
from frank.experiments import registry
from frank.experiments.journal import read_events
from frank.jsonl import read as read_jsonl

pytestmark = pytest.mark.engine

DESIGN = """
name = "cross-engine-episodes"
question = "Is llama.cpp on SmolLM2 faster over these episodes than vLLM on the tiny model?"
profile = "embedded-cpu"

[[arms]]
name = "vllm-tiny"

[[arms]]
name = "llamacpp-smollm2"
profile = "llamacpp-cpu"

[design]
kind = "balanced"
starts_per_arm = 1

[episodes]
suite = "suite.toml"
draws = 2

[measure]
name = "episode_total_time"

[rule]
test = "criteria"
treatment = "llamacpp-smollm2"
control = "vllm-tiny"

[[rule.criteria]]
measure = "episode_total_time"
aggregate = "sum"
compare = "lower"

[[rule.criteria]]
measure = "episodes_passed"
aggregate = "sum"
compare = "not_lower"
margin = 2
"""


def _one_task_suite(folder: Path) -> None:
    """One short task (one turn of at most 16 tokens, the bash tool only): an episode takes seconds."""
    (folder / "ws").mkdir()
    (folder / "ws" / "notes.txt").write_text("The answer is 42.\n")
    (folder / "grade.py").write_text(
        "import json, pathlib\np = pathlib.Path('answer.txt')\n"
        "print(json.dumps({'pass': p.is_file() and p.read_text().strip() == '42'}))\n"
    )
    (folder / "ref.py").write_text("open('answer.txt', 'w').write('42')\n")
    (folder / "suite.toml").write_text(
        'format = "frank-suite"\nformat_version = 1\nname = "one-task"\n'
        '[defaults]\ntools = ["bash"]\nmax_turns = 1\nmax_tokens_per_turn = 16\nwall_time_s = 120\n'
        '\n[[tasks]]\nid = "answer"\ninstruction = "Read notes.txt and write the answer to answer.txt."\n'
        'workspace = "ws"\ngrader = "grade.py"\nreference = "ref.py"\n'
    )


@pytest.mark.timeout(1200)
def test_arms_on_vllm_and_llamacpp_run_register_to_report(frank_cli, fresh_frank_home: Path, tmp_path: Path) -> None:
    _one_task_suite(tmp_path)
    design = tmp_path / "cross.toml"
    design.write_text(DESIGN)
    reg = frank_cli("experiment", "register", str(design), "--json", home=fresh_frank_home, timeout=120)
    assert reg.returncode == 0, reg.stderr
    run_id = json.loads(reg.stdout)["run_id"]

    ran = frank_cli("experiment", "run", run_id, "--json", home=fresh_frank_home, timeout=1100)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run = registry.load_run(run_id)
    events = read_events(run.journal_path)
    by_arm: dict[str, list[dict]] = {}
    for ev in events:
        slot = ev.get("slot")
        if slot is not None and ev["event"] != "registered":
            by_arm.setdefault(run.slots[slot].arm, []).append(ev)

    # each arm started its own engine kind; llama.cpp once per draw, vLLM once for both draws
    started = {arm: [e for e in evs if e["event"] == "cell_started"] for arm, evs in by_arm.items()}
    assert {arm: s[0]["profile"] for arm, s in started.items()} == {
        "vllm-tiny": "embedded-cpu",
        "llamacpp-smollm2": "llamacpp-cpu",
    }
    ready = {arm: [e for e in evs if e["event"] == "engine_ready"] for arm, evs in by_arm.items()}
    assert len(ready["vllm-tiny"]) == 1
    assert (
        len(ready["llamacpp-smollm2"]) == 2
        and ready["llamacpp-smollm2"][0]["pid"] != ready["llamacpp-smollm2"][1]["pid"]
    )
    restarts = [e for e in by_arm["llamacpp-smollm2"] if e["event"] == "engine_stopped" and e.get("reason")]
    assert [e["reason"] for e in restarts] == ["a fresh prompt cache for draw 2"]

    # every episode reached its engine (llama.cpp's /v1 wants its key: each draw's own) and was graded
    for arm, namespace in (("vllm-tiny", "cache_salt"), ("llamacpp-smollm2", "fresh engine start")):
        [done] = [e for e in by_arm[arm] if e["event"] == "cell_done"]
        results = read_jsonl(Path(done["dir"]) / "results.jsonl")
        assert [r["draw"] for r in results] == [1, 2]
        assert all(r["outcome"] in ("pass", "fail") and r["requests"] >= 1 for r in results), results
        assert {r["cache_namespace"] for r in results} == {namespace}
        assert len({r["cache_salt"] for r in results}) == 2

    rep = frank_cli("experiment", "report", run_id, "--json", home=fresh_frank_home, timeout=120)
    assert rep.returncode == 0, rep.stderr
    r = json.loads(rep.stdout)
    assert r["decision"] in ("confirmed", "not confirmed") and all(c["met"] is not None for c in r["criteria"])
    assert sorted((d["arm"], d["draw"]) for d in r["draws"]) == [
        ("llamacpp-smollm2", 1),
        ("llamacpp-smollm2", 2),
        ("vllm-tiny", 1),
        ("vllm-tiny", 2),
    ]
    total = {arm: sum(d["total_s"] for d in r["draws"] if d["arm"] == arm) for arm in ("vllm-tiny", "llamacpp-smollm2")}
    [time_rule] = [c for c in r["criteria"] if c["measure"] == "episode_total_time"]
    assert (time_rule["treatment"], time_rule["control"]) == pytest.approx(
        (total["llamacpp-smollm2"], total["vllm-tiny"]), abs=0.01
    )
    page = tmp_path / "report.html"
    html = frank_cli("experiment", "report", run_id, "--html", str(page), home=fresh_frank_home, timeout=120)
    assert html.returncode == 0, html.stderr
    assert 'id="draws"' in page.read_text() and "fresh engine start" in page.read_text()
    assert EngineController(state_dir=fresh_frank_home / "state").status().state == "stopped"
