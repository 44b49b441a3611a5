"""Live episodes against the real embedded engine: inspect-ai's ReAct agent with its tools, the graders,
client timing and the recording, end to end. The tiny random model passes nothing, by design: what is
checked is that the harness, grading, timing, recording, resume and faults are real."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from frank.episodes.runner import create_run, load_state, read_jsonl, report, run_episodes
from frank.episodes.suite import load_suite
from frank.episodes.tasks import SECRET_FILE, draw_seed, run_secret
from frank.workloads.format import check_workload
from tests.integration.vanishing_proxy import VanishingEngineProxy

REPO = Path(__file__).resolve().parents[2]
TASKS = ["fix-failing-test", "trace-fault", "rename-symbol", "csv-figure", "implement-spec", "incident-timeline"]


def test_w01_mini_draw_runs_six_graded_timed_recorded_episodes_and_the_recording_replays(frank_cli, engine):
    result = frank_cli("episodes", "run", "w01-mini", "--draws", "1", "--json", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    assert out["status"] == "finished" and out["episodes_done"] == 6
    suite = load_suite("w01-mini")
    assert out["suite_version"] == suite.version == 3
    episodes = out["episodes"]
    assert [e["task"] for e in episodes] == TASKS
    folder = Path(out["folder"])
    results = read_jsonl(folder / "results.jsonl")
    # no process of the episodes (their sandboxes, the harness worker) outlives the run
    assert _processes_mentioning(str(folder)) == []
    assert {(r["suite_version"], r["seed"]) for r in results} == {(3, draw_seed(run_secret(folder), suite.seed, 1))}
    # hidden answers apart from the workspaces the sandbox mounted
    answers = sorted(p.name for p in (folder / "answers").iterdir())
    assert answers == sorted([SECRET_FILE, *(f"d1-{t}.expected.json" for t in TASKS)])
    assert not list((folder / "workspaces").glob(".*"))
    for ep, rec, task in zip(episodes, results, suite.tasks):
        assert ep["draw"] == 1
        assert ep["outcome"] in ("pass", "fail"), ep  # graded: the harness did not fail
        assert ep["client_s"] > 0 and rec["working_s"] > 0
        assert 1 <= ep["turns"] <= task.max_turns
        # every model request of the episode reached the engine through the recorder, and only those
        assert ep["requests"] == rec["recorded_requests"] >= ep["turns"]
        assert ep["prompt_tokens"] > 0 and 0 < ep["completion_tokens"] <= ep["requests"] * task.max_tokens_per_turn
        assert Path(rec["inspect_log"]).is_file()
        assert Path(rec["workspace"]).is_dir()
    assert out["draws"] == [
        {
            "draw": 1,
            "episodes": 6,
            "total_s": round(sum(e["client_s"] for e in episodes), 3),
            "passed": sum(e["outcome"] == "pass" for e in episodes),
            "failed": sum(e["outcome"] == "fail" for e in episodes),
            "errors": 0,
        }
    ]
    assert (folder / "harness.log").is_file()

    # the recording: a valid workload whose draw holds every request, with the seed's settings
    recording = Path(out["recording"])
    workload, errors = check_workload(recording, keep=True)
    assert errors == []
    assert (workload.meta["suite"], workload.meta["suite_version"]) == ("w01-mini", 3)
    [draw] = workload.draws
    requests = workload.requests[draw.name]
    assert len(requests) == sum(e["requests"] for e in episodes)
    assert [r.task for r in requests] == [t for e in episodes for t in [e["task"]] * e["requests"]]
    salts = {r.body["cache_salt"] for r in requests}
    assert len(salts) == 1 and salts == {results[0]["cache_salt"]}
    assert {r.body["temperature"] for r in requests} == {1.0}
    assert all(r.body["chat_template_kwargs"] == {"thinking": True} for r in requests)
    assert all(
        {t["function"]["name"] for t in r.body["tools"]} >= {"bash", "python", "text_editor", "submit"}
        for r in requests
    )

    replay = frank_cli("replay", str(recording), "--json", timeout=600)
    assert replay.returncode == 0, replay.stderr[-2000:]
    replayed = json.loads(replay.stdout)
    assert replayed["totals"]["ok"] == len(requests) and replayed["totals"]["failed"] == 0


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd:
                found.append(f"{proc.name}: {cmd[:200]}")
    return found


def _fixture_suite(tmp_path: Path, crash_first: bool = True) -> Path:
    """Three small tasks on fixture workspaces: the first task's grader crashes."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.txt").write_text("The answer is 42.\n")
    (tmp_path / "grade.py").write_text(
        "import json, pathlib\np = pathlib.Path('answer.txt')\n"
        "print(json.dumps({'pass': p.is_file() and p.read_text().strip() == '42'}))\n"
    )
    (tmp_path / "crash.py").write_text("raise RuntimeError('grader bug')\n")
    (tmp_path / "ref.py").write_text("open('answer.txt', 'w').write('42')\n")
    tasks = ""
    for name in ("first", "second", "third"):
        grader = "crash.py" if name == "first" and crash_first else "grade.py"
        tasks += (
            f'\n[[tasks]]\nid = "{name}"\ninstruction = "Read notes.txt and write the answer to answer.txt."\n'
            f'workspace = "ws"\ngrader = "{grader}"\nreference = "ref.py"\n'
        )
    path = tmp_path / "suite.toml"
    path.write_text(
        'format = "frank-suite"\nformat_version = 1\nname = "fixture"\n'
        "[defaults]\nmax_turns = 1\nmax_tokens_per_turn = 16\nwall_time_s = 60\n" + tasks
    )
    return path


def _wait_for(predicate, timeout: float = 120.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_crashing_grader_is_error_the_run_goes_on_and_a_killed_run_resumes_at_the_first_unfinished(engine, tmp_path):
    from frank.episodes import job

    folder = create_run(_fixture_suite(tmp_path), draws=1, out=tmp_path / "run")
    pid = job.launch(folder).pid
    events = folder / "events.jsonl"
    _wait_for(
        lambda: any(e.get("event") == "episode_started" and e.get("task") == "second" for e in read_jsonl(events)),
        what="the second episode to start",
    )
    os.killpg(pid, signal.SIGKILL)  # the runner and its harness worker, mid-episode
    _wait_for(lambda: load_state(folder).status == "interrupted", 20, "the run to show as interrupted")
    assert [r["task"] for r in read_jsonl(folder / "results.jsonl")] == ["first"]

    outcome = job.run(folder)
    assert outcome.status == "finished" and outcome.ran == 2
    results = read_jsonl(folder / "results.jsonl")
    assert [(r["task"], r["outcome"]) for r in results][1:] == [("second", "fail"), ("third", "fail")]
    first = results[0]
    assert (first["outcome"], first["error_kind"]) == ("error", "grader")
    assert first["detail"].startswith("grader exited 1: RuntimeError: grader bug")
    started = [e["task"] for e in read_jsonl(events) if e["event"] == "episode_started"]
    assert started == ["first", "second", "second", "third"]  # "first" was not run again
    rep = report(folder)
    assert rep.draws[0]["errors"] == 1 and rep.draws[0]["failed"] == 2 and rep.complete


def test_engine_dying_mid_episode_is_error_and_the_draw_resumes_after_a_restart(engine, tmp_path):
    proxy = VanishingEngineProxy(engine.status().port, die_on_request=2)
    try:
        folder = create_run(_fixture_suite(tmp_path, crash_first=False), draws=1, out=tmp_path / "run")
        outcome = run_episodes(folder, proxy.url)
        assert outcome.status == "interrupted" and "engine stopped answering" in outcome.reason
        [first] = read_jsonl(folder / "results.jsonl")
        assert (first["task"], first["outcome"], first["error_kind"]) == ("first", "error", "engine")
        assert load_state(folder).status == "interrupted"
        proxy.revive()  # the engine is back
        outcome = run_episodes(folder, proxy.url)
        assert outcome.status == "finished"
        assert [(r["task"], r["outcome"]) for r in read_jsonl(folder / "results.jsonl")] == [
            ("first", "error"),
            ("second", "fail"),
            ("third", "fail"),
        ]
    finally:
        proxy.close()
