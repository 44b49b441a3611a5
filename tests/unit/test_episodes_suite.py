"""The task-suite format, the W01-like generators, graders and references (no engine needed)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from frank.episodes.grade import check_references, run_grader, workspace_bytes
from frank.episodes.suite import check_suite, load_suite, resolve_suite
from frank.episodes.tasks import FULL_BYTES, GENERATORS, SECRET_FILE, answer_path, draw_seed, materialize, run_secret

REPO = Path(__file__).resolve().parents[2]


def _tree_sha(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def test_builtin_suites_have_the_six_w01_tasks():
    for name in ("w01-mini", "w01-full"):
        suite = load_suite(name)
        assert [t.id for t in suite.tasks] == list(GENERATORS)
        assert suite.scale == name.split("-")[1]
        assert all(t.tools == ("bash", "python", "text_editor") for t in suite.tasks)
        assert suite.version == 3
    mini = load_suite("w01-mini")
    assert {t.max_turns for t in mini.tasks} == {3}
    assert {t.max_tokens_per_turn for t in mini.tasks} == {48}


def test_same_seed_same_bytes_and_another_seed_differs(tmp_path):
    suite = load_suite("w01-mini")
    for task in suite.tasks:
        a, b, c = tmp_path / f"{task.id}-a", tmp_path / f"{task.id}-b", tmp_path / f"{task.id}-c"
        ea = materialize(task, 1, "mini", a, answer_path(tmp_path, f"{task.id}-a"))
        eb = materialize(task, 1, "mini", b, answer_path(tmp_path, f"{task.id}-b"))
        ec = materialize(task, 2, "mini", c, answer_path(tmp_path, f"{task.id}-c"))
        assert _tree_sha(a) == _tree_sha(b), task.id
        assert ea.read_bytes() == eb.read_bytes(), task.id
        assert _tree_sha(a) != _tree_sha(c), task.id
        assert ea.read_bytes() != ec.read_bytes(), task.id  # every answer, hidden cases included, is the draw's
        assert not any(p.name.endswith("expected.json") for p in a.rglob("*")), "the answer leaked into the workspace"
        assert ea.parent == tmp_path / "answers"
    with pytest.raises(ValueError, match="would be inside the workspace"):
        materialize(suite.tasks[0], 1, "mini", tmp_path / "w", tmp_path / "w" / "answer.json")


def test_every_draw_has_its_own_seed_from_its_runs_secret(tmp_path):
    seeds = [draw_seed("s", 1, d) for d in range(1, 21)]
    assert len(set(seeds)) == 20
    assert seeds == [draw_seed("s", 1, d) for d in range(1, 21)]  # the same secret (an experiment's cells)
    assert draw_seed("t", 1, 1) not in seeds and draw_seed("s", 2, 1) not in seeds
    # a run's secret: random, kept with its answers (0600), the same when read again
    first, other = run_secret(tmp_path / "a"), run_secret(tmp_path / "b")
    assert first != other and len(first) == 32 and run_secret(tmp_path / "a") == first
    assert (tmp_path / "a" / "answers" / SECRET_FILE).stat().st_mode & 0o777 == 0o600


def test_full_scale_workspaces_are_long_context_sized(tmp_path):
    suite = load_suite("w01-full")
    for task in suite.tasks:
        ws = tmp_path / task.id
        materialize(task, suite.seed, suite.scale, ws, answer_path(tmp_path, task.id))
        size = workspace_bytes(ws)
        # 105K-175K tokens at about four characters a token
        assert 0.95 * FULL_BYTES[task.id] <= size <= 700_000, (task.id, size)


GOOD_TASK = """
[[tasks]]
id = "answer"
instruction = "Write 42 to answer.txt."
workspace = "ws"
grader = "grade.py"
reference = "ref.py"
"""


def _suite(
    tmp_path: Path,
    body: str,
    grader: str = "import json, pathlib\n"
    "ok = pathlib.Path('answer.txt').is_file() and pathlib.Path('answer.txt').read_text().strip() == '42'\n"
    "print(json.dumps({'pass': ok, 'detail': 'checked'}))\n",
) -> Path:
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "ws" / "README").write_text("write the answer\n")
    (tmp_path / "grade.py").write_text(grader)
    (tmp_path / "ref.py").write_text("open('answer.txt', 'w').write('42\\n')\n")
    path = tmp_path / "suite.toml"
    path.write_text('format = "frank-suite"\nformat_version = 1\nname = "tiny"\n' + body)
    return path


def test_a_fixture_suite_checks_and_its_reference_passes(tmp_path):
    suite = load_suite(_suite(tmp_path, GOOD_TASK))
    [check] = check_references(suite)
    assert (check.reference, check.untouched, check.adversarial) == ("pass", "fail", ())


def test_cli_check_references_json_lists_each_adversarial_attempt_with_its_outcome(frank_cli, tmp_path):
    attempts = tmp_path / "attempts"
    attempts.mkdir()
    (attempts / "guess.py").write_text("# expect: checked\nopen('answer.txt', 'w').write('41')\n")
    (attempts / "right.py").write_text("# expect: checked\nopen('answer.txt', 'w').write('42')\n")
    path = _suite(tmp_path, GOOD_TASK + 'adversarial = "attempts"\n')
    result = frank_cli("episodes", "check", str(path), "--references", "--json", home=tmp_path / "home", timeout=120)
    payload = json.loads(result.stdout)
    [task] = payload["references"]
    assert (task["reference"], task["untouched"]) == ("pass", "fail")
    assert [(a["attempt"], a["outcome"], a["ok"]) for a in task["adversarial"]] == [
        ("guess", "fail", True),
        ("right", "pass", False),  # an attempt that passes makes the check fail
    ]
    assert (result.returncode, payload["ok"], task["ok"]) == (1, False, False)
    text = frank_cli("episodes", "check", str(path), "--references", home=tmp_path / "home", timeout=120)
    assert text.returncode == 1 and "attempt right: pass (checked), expected fail: checked" in text.stdout


def test_broken_manifest_errors_name_file_and_line(tmp_path):
    body = """
[defaults]
max_turns = 0

[[tasks]]
id = "a"
instruction = "x"
workspace = "generator:nope"
reference = "ref.py"
tools = ["bash", "browser"]

[[tasks]]
id = "a"
instruction = ""
workspace = "missing-folder"
grader = "no-such-grader.py"
reference = "ref.py"
"""
    path = _suite(tmp_path, body)
    suite, errors = check_suite(path)
    assert suite is None
    text = [str(e) for e in errors]
    lines = path.read_text().splitlines()

    def line_of(snippet: str, start: int = 0) -> int:
        return next(i for i, line in enumerate(lines, 1) if i > start and snippet in line)

    first = line_of("[[tasks]]")
    second = line_of("[[tasks]]", first)
    dup_id, empty = line_of('id = "a"', second - 1), line_of('instruction = ""')
    expect = {
        f"{path}:{line_of('max_turns = 0')}: defaults.max_turns: expected a positive integer, got 0",
        f"{path}:{first}: tasks[0].grader: missing required field",
        f"{path}:{line_of('generator:nope')}: tasks[0].workspace: unknown generator 'generator:nope' (known: "
        + ", ".join(GENERATORS)
        + ")",
        f"{path}:{line_of('browser')}: tasks[0].tools: unknown tool(s) ['browser'] (known: bash, python, text_editor)",  # noqa: E501
        f"{path}:{dup_id}: tasks[1].id: duplicate task id 'a' (first at line {first + 1})",
        f"{path}:{line_of('missing-folder')}: tasks[1].workspace: no such fixture folder 'missing-folder'",
        f"{path}:{line_of('no-such-grader')}: tasks[1].grader: no such file 'no-such-grader.py'",
        f"{path}:{empty}: tasks[1].instruction: expected a non-empty string",
    }
    assert expect <= set(text), "\n".join(text)


def test_bad_toml_and_newer_version(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('format = "frank-suite"\nformat_version = 1\nname = "x"\n[[tasks]\n')
    _, errors = check_suite(path)
    assert len(errors) == 1 and str(errors[0]).startswith(f"{path}:4: bad TOML")
    path.write_text('format = "frank-suite"\nformat_version = 7\nname = "x"\n' + GOOD_TASK)
    _, errors = check_suite(path)
    assert f"{path}:2: format_version: 7 is newer than this frank reads (1)" in [str(e) for e in errors]


def test_cli_run_with_a_broken_suite_runs_nothing(frank_cli, tmp_path):
    path = _suite(tmp_path, GOOD_TASK.replace('grader = "grade.py"\n', ""))
    home = tmp_path / "home"
    result = frank_cli(
        "episodes", "run", str(path), "--draws", "1", "--url", "http://127.0.0.1:9", home=home, timeout=120
    )
    assert result.returncode == 1
    assert f"{path}:5: tasks[0].grader: missing required field" in result.stderr
    assert "nothing was run" in result.stderr
    assert not (home / "data" / "runs" / "episodes").exists() or not any(
        (home / "data" / "runs" / "episodes").iterdir()
    )
    result = frank_cli("episodes", "check", str(path), home=home, timeout=120)
    assert result.returncode == 1 and f"{path}:5:" in result.stderr


@pytest.mark.parametrize(
    "grader, detail",
    [
        ("raise SystemExit('boom')", "grader exited 1: boom"),
        ("import json\nprint(json.dumps({'pass': 1 / 0}))", "grader exited 1: ZeroDivisionError: division by zero"),
        ("print('looks fine')", 'grader printed no verdict (last line {"pass": true|false, ...})'),
        ("import time\ntime.sleep(30)", "grader ran past 1 s"),
    ],
)
def test_a_grader_that_crashes_is_an_error_not_a_fail(tmp_path, grader, detail):
    body = GOOD_TASK + "grader_timeout_s = 1\n"
    suite = load_suite(_suite(tmp_path, body, grader=grader))
    ws = tmp_path / "run-ws"
    materialize(suite.tasks[0], suite.seed, suite.scale, ws, answer_path(tmp_path, "run-ws"))
    verdict = run_grader(suite.tasks[0], ws, None)
    assert (verdict.outcome, verdict.detail) == ("error", detail)


def test_resolve_suite_names_builtins_and_refuses_unknown():
    assert resolve_suite("w01-mini") == REPO / "frank" / "episodes" / "suites" / "w01-mini.toml"
    from frank.errors import FrankError

    with pytest.raises(FrankError, match="no suite 'w99'"):
        resolve_suite("w99")


def test_episode_designs_parse_and_refuse_what_they_cannot_run():
    from frank.experiments.design import DesignError, load_design, parse_design_text

    design = load_design(REPO / "frank" / "experiments" / "designs" / "episodes-adoption.toml")
    assert (design.kind, design.rule.test, design.episodes.suite, design.episodes.draws) == (
        "balanced",
        "criteria",
        "w01-mini",
        1,
    )
    assert [(c.measure, c.compare, c.margin) for c in design.rule.criteria] == [
        ("episode_total_time", "lower", 0.0),
        ("episodes_passed", "not_lower", 2.0),
    ]
    assert design.fidelity is not None and '"episodes":{"draws":1,"suite":"w01-mini"}' in design.canonical
    text = (REPO / "frank" / "experiments" / "designs" / "episodes-adoption.toml").read_text()
    where = "d.toml"
    cases = {
        text.replace(
            'name = "episode_total_time"\n', 'name = "time_per_verify_step"\n'
        ): "d.toml: measure.name: 'time_per_verify_step' is not one of: episode_total_time, episodes_passed",
        text.replace(
            'measure = "episodes_passed"', 'measure = "kl"'
        ): "d.toml: rule.criteria[1].measure: 'kl' is not one of: episode_total_time, episodes_passed "
        "(fidelity has its own [fidelity] rule)",
        text.replace("draws = 1", "draws = 0"): "d.toml: episodes.draws: must be at least 1, got 0",
        text.replace(
            '[episodes]\nsuite = "w01-mini"', '[workload]\nname = "w01-mini"\n[episodes]\nsuite = "w01-mini"'
        ): "d.toml: episodes: a start either replays a [workload] or runs [episodes], not both",
    }
    for bad, message in cases.items():
        with pytest.raises(DesignError) as info:
            parse_design_text(bad, where)
        assert re.sub(r"^d\.toml:\d+: ", "d.toml: ", str(info.value)) == message  # with the field's line
    # criteria on live starts needs episodes: a replay design keeps its exact test
    replay = text.replace(
        '[episodes]\nsuite = "w01-mini"      # a suite manifest beside this file, or a built-in\ndraws = 1',
        '[workload]\nname = "w01-mini"',
    ).replace('name = "episode_total_time"\n', 'name = "total_replay_time"\n')
    with pytest.raises(DesignError, match="a 'balanced' design uses the 'permutation' test, not 'criteria'"):
        parse_design_text(replay, where)


@pytest.mark.parametrize(
    "spec2, spec4, decision, reason",
    [
        # (episode_total_time, episodes_passed, KL) per arm
        ((100.0, 4, 0.010), (120.0, 5, 0.010), "confirmed", "all 2 criteria met and the fidelity rule holds"),
        ((100.0, 2, 0.010), (120.0, 5, 0.010), "not confirmed", "criteria not met: episodes_passed"),
        ((130.0, 5, 0.010), (120.0, 5, 0.010), "not confirmed", "criteria not met: episode_total_time"),
        ((100.0, 5, 0.040), (120.0, 5, 0.010), "not confirmed", "guard failed: fidelity (all 2 criteria met)"),
    ],
)
def test_the_adoption_rule_on_live_start_measures(spec2, spec4, decision, reason):
    """The three rules of the seed's adoption test, as `report_for_run` feeds a live [episodes] run."""
    from frank.experiments.analysis import analyze
    from frank.experiments.design import load_design
    from frank.experiments.observations import Observation

    design = load_design(REPO / "frank" / "experiments" / "designs" / "episodes-adoption.toml")
    obs = []
    for start, (arm, (total, passed, kl)) in enumerate((("spec-4", spec4), ("spec-2", spec2)), 1):
        fidelity = {"sets": {name: {"kl": kl, "reference_floor": 0.0} for name in ("code", "agent", "prose")}}
        obs.append(Observation(start, None, arm, total, "episode_total_time", failed_requests=0, fidelity=fidelity))
        obs.append(Observation(start, None, arm, passed, "episodes_passed", failed_requests=0))
    report = analyze(design, obs)
    assert (report.verdict, report.decision.reason) == (decision, reason)
    assert [c.met is not None for c in report.criteria] == [True, True]
    assert report.fidelity["status"] in ("pass", "fail")  # the third rule is evaluated, never skipped
