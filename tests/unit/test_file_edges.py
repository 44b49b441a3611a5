"""The edge of every hand-edited file (frank.tomlfile and each format's schema): the values TOML allows and
frank does not take, the line of a field, paths that leave their folder, flags a profile may not give,
and a profile refused before anything is spawned. Pure parsing: no engine starts here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from frank import tomlfile
from frank.campaign.parts import CampaignError, parse_campaign_text
from frank.engine.kinds import build_launch
from frank.engine.profile_schema import FIELD_FLAGS, OWNED_FLAGS
from frank.engine.profiles import ProfileError, load_profile, load_profile_file, profile_files
from frank.episodes.suite import builtin_suites, check_suite
from frank.experiments.design import load_design, parse_design_text
from frank.experiments.tables import DesignError

REPO = Path(__file__).resolve().parents[2]
PROFILE = """name = "mine"
python = "/usr/bin/python3"
model = "/models/x"
served_model_name = "x"
extra_args = ["--enable-prefix-caching"]

[knobs.sched]
values = [1, 2]
default = 1
apply = "arg"
target = "--sched"
"""


def write(folder: Path, text: str, name: str = "mine") -> Path:
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


def test_every_shipped_file_loads(tmp_path):
    """Same formats for everything valid today: every shipped profile, design, suite and campaign loads."""
    for path in profile_files().values():
        load_profile_file(path)
    designs = sorted((REPO / "frank" / "experiments" / "designs").glob("*.toml"))
    assert len(designs) >= 10
    for path in designs:
        load_design(path)
    for path in builtin_suites().values():
        suite, errors = check_suite(path)
        assert suite is not None, errors
    for path in sorted((REPO / "frank" / "campaign" / "examples").glob("*.toml")):
        parse_campaign_text(path.read_text(), path)


@pytest.mark.parametrize(
    ("old", "new", "field", "line"),
    [
        ("values = [1, 2]\ndefault = 1", "values = [1, 2]\ndefault = 2026-01-01", "knobs.sched.default", 9),
        ("values = [1, 2]", "values = [1, 1979-05-27T07:32:00]", "knobs.sched.values[1]", 8),
        ("default = 1", "default = 1\ndescription = 12:30:00", "knobs.sched.description", 10),
        ('served_model_name = "x"', 'served_model_name = "x"\nstartup_timeout_s = inf', "startup_timeout_s", 5),
        ('served_model_name = "x"', 'served_model_name = "x"\nstop_grace_s = nan', "stop_grace_s", 5),
        (
            'served_model_name = "x"',
            'served_model_name = "x"\nmax_model_len = 99999999999999999999',
            "max_model_len",
            5,
        ),
        ('served_model_name = "x"', 'served_model_name = "x"\ntensor_parallel_size = true', "tensor_parallel_size", 5),
        ('served_model_name = "x"', 'served_model_name = "x"\nstartup_timeout_s = 0', "startup_timeout_s", 5),
        ('served_model_name = "x"', 'served_model_name = "x"\nenv = { A = "a\\u0000b" }', "env.A", 5),
        ('target = "--sched"', 'target = "--sched"\ncolour = 1', "knobs.sched.colour", 12),
    ],
)
def test_a_value_toml_allows_and_frank_does_not_is_refused_with_file_line_and_field(tmp_path, old, new, field, line):
    path = write(tmp_path, PROFILE.replace(old, new, 1))
    with pytest.raises(ProfileError) as err:
        load_profile_file(path)
    assert str(err.value).startswith(f"{path}:{line}: {field}: "), str(err.value)


@pytest.mark.parametrize(
    ("old", "new", "field", "reason"),
    [
        ('["--enable-prefix-caching"]', '["--port", "8000"]', "extra_args[0]", "frank's own flag"),
        ('["--enable-prefix-caching"]', '["--host=0.0.0.0"]', "extra_args[0]", "frank's own flag"),
        ('["--enable-prefix-caching"]', '["--served_model_name", "y"]', "extra_args[0]", "frank's own flag"),
        ('["--enable-prefix-caching"]', '["--max-model-len", "9"]', "extra_args[0]", "max_model_len: set that"),
        ('["--enable-prefix-caching"]', '["--sched", "2"]', "knobs.sched.target", "also given in extra_args[0]"),
        ('target = "--sched"', 'target = "--port"', "knobs.sched.target", "frank's own flag"),
        (
            'target = "--sched"',
            'target = "--sched"\nwith_args = { "2" = ["--api-key", "k"] }',
            "knobs.sched.with_args.2",
            "frank's own flag",
        ),
        (
            'target = "--sched"',
            'target = "--sched"\n[knobs.other]\nvalues = [1]\ndefault = 1\napply = "arg"\ntarget = "--sched"',
            "knobs.other.target",
            "two knobs on one flag",
        ),
    ],
)
def test_a_profile_cannot_override_franks_flags_or_itself(tmp_path, old, new, field, reason):
    path = write(tmp_path, PROFILE.replace(old, new, 1))
    with pytest.raises(ProfileError) as err:
        load_profile_file(path)
    assert re.match(rf"{re.escape(str(path))}:\d+: {re.escape(field)}: .*{re.escape(reason)}", str(err.value)), (
        err.value
    )


@pytest.mark.parametrize("name", ["embedded-cpu", "llamacpp-cpu", "frankenstein"])
def test_the_flag_tables_cover_every_flag_the_kind_builds(monkeypatch, tmp_path, name):
    """Every flag frank puts before a profile's extra_args is in OWNED_FLAGS or FIELD_FLAGS of its kind."""
    monkeypatch.setenv("FRANK_MODELS", str(tmp_path))
    prof = load_profile(name)
    argv = build_launch(prof, prof.default_knobs(), 8000, "T").argv
    head = argv[: len(argv) - len(prof.extra_args)] if prof.kind == "vllm" else argv
    known = {**OWNED_FLAGS[prof.kind], **FIELD_FLAGS[prof.kind]}
    built = [a for a in head if a.startswith("--") and a not in prof.resolved_extra_args()]
    knob_flags = {k.target for k in prof.knobs.values()} | {
        f for k in prof.knobs.values() for v in k.with_args.values() for f in v
    }
    assert [a for a in built if a not in known and a not in knob_flags] == []


def test_a_profile_knob_that_is_a_toml_date_is_refused_at_start_and_nothing_is_spawned(frank_cli, tmp_path):
    home = tmp_path / "home"
    profiles = home / "config" / "profiles"
    profiles.mkdir(parents=True)
    text = (REPO / "frank" / "engine" / "profiles" / "llamacpp-cpu.toml").read_text()
    text = text.replace('name = "llamacpp-cpu"', 'name = "dated"').replace("default = 1\n", "default = 2026-12-01\n", 1)
    path = write(profiles, text, "dated")
    result = frank_cli("engine", "start", "--profile", "dated", "--json", home=home, timeout=60)
    assert result.returncode != 0
    line = text.splitlines().index("default = 2026-12-01") + 1
    assert f"{path}:{line}: knobs.threads.default: a TOML date" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not (home / "state").exists()  # no record, no spec, no log: nothing was spawned
    status = frank_cli("engine", "status", "--json", home=home, timeout=60)
    assert json.loads(status.stdout)["state"] == "stopped"
    assert not (home / "state").exists()  # a status reads; it creates nothing


def test_key_lines_find_nested_tables_arrays_and_inline_keys():
    text = (REPO / "frank" / "campaign" / "examples" / "seed.toml").read_text()
    lines = tomlfile.KeyLines(text)
    rows = text.splitlines()
    assert rows[lines.line("parts[1].evidence[1].policy") - 1].startswith("policy = ")
    assert rows[lines.line("parts[1].revert_rules[2].floor") - 1] == "floor = 0.031"
    assert rows[lines.line("parts[1].knobs.cpu_experts_sched") - 1].startswith("knobs = {")  # inline: its key
    assert lines.line("absent") == 0


def test_suite_paths_stay_inside_the_suite_folder(tmp_path):
    suite = tmp_path / "s"
    (suite / "g").mkdir(parents=True)
    (suite / "g" / "grade.py").write_text("print(1)\n")
    (tmp_path / "outside.py").write_text("print(2)\n")
    (suite / "g" / "link.py").symlink_to(tmp_path / "outside.py")
    base = """format = "frank-suite"
format_version = 1
name = "s"
[[tasks]]
id = "t"
instruction = "do it"
workspace = "generator:csv-figure"
grader = "GRADER"
reference = "g/grade.py"
"""
    for grader in ("../outside.py", str(tmp_path / "outside.py"), "g/link.py", "g/../../outside.py"):
        path = suite / "suite.toml"
        path.write_text(base.replace("GRADER", grader))
        found, errors = check_suite(path)
        assert found is None
        assert [str(e) for e in errors] == [
            f"{path}:8: tasks[0].grader: {grader!r} resolves outside the suite's folder "
            "(a suite names only files inside it)"
        ]
    path.write_text(base.replace("GRADER", "g/grade.py"))
    assert check_suite(path)[0] is not None


def test_campaign_paths_stay_inside_its_folder_or_the_shipped_designs(tmp_path):
    text = (REPO / "frank" / "campaign" / "examples" / "smollm2.toml").read_text()
    path = tmp_path / "campaign.toml"
    for ref in ("@designs/../../../etc/passwd", "/etc/passwd", "../elsewhere.toml"):
        with pytest.raises(CampaignError, match=r"campaign\.toml:\d+: parts\[0\]\.design: '.*' resolves outside"):
            parse_campaign_text(text.replace('design = "@designs/body-smollm2.toml"', f'design = "{ref}"'), path)


def test_design_bounds_are_what_the_exact_test_and_runner_carry():
    text = (REPO / "frank" / "experiments" / "designs" / "spec-tokens-2-vs-4.toml").read_text()
    assert "blocks = " in text
    too_many = re.sub(r"blocks = \d+", "blocks = 101", text)
    with pytest.raises(DesignError, match=r":\d+: design\.blocks: must be at most 100"):
        parse_design_text(too_many, "d.toml")
    huge = re.sub(r"blocks = \d+", "blocks = 2000", text)
    with pytest.raises(DesignError, match="must be at most 100"):  # 2^2000 once overflowed the exact test
        parse_design_text(huge, "d.toml")


def test_an_engine_refusal_names_the_profile_field_its_log_points_at(monkeypatch, tmp_path):
    from frank.engine.records import ExitRecord
    from frank.engine.refusal import blame

    monkeypatch.setenv("FRANK_MODELS", str(tmp_path))
    prof = load_profile("llamacpp-cpu")
    argv = build_launch(prof, prof.default_knobs(), 8000, "T").argv
    assert blame(prof, argv, ["error: invalid argument: --spec-ngram-simple-size-m"], None) == [
        "knobs.draft_tokens (--spec-ngram-simple-size-m, named in the log)"
    ]
    assert blame(prof, argv, ["error: unknown value for --chat-template-file"], None) == [
        "extra_args[4] (--chat-template-file, named in the log)"
    ]
    assert blame(prof, argv, ["couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8000"], None) == [
        "port (auto, on 127.0.0.1)"
    ]
    assert blame(prof, argv, ["n_threads must be positive"], None) == ["knobs.threads (--threads 1)"]
    assert blame(prof, argv, ["[frank] server exited: ..."], ExitRecord(spawn_error="No such file: /x")) == [
        "python (No such file: /x)"
    ]
    assert blame(prof, argv, ["all fine until it was not"], ExitRecord(returncode=1)) == []  # no guess


def test_a_context_beyond_the_trained_length_needs_rope_scaling(tmp_path):
    """SmolLM2's GGUF says 8192: 32768 with the context knob's YaRN flags is served; 32768 without is refused."""
    from frank.engine.kinds import check_launch
    from frank.engine.model_facts import trained_context

    prof = load_profile("llamacpp-cpu")
    model = Path(prof.model_path())
    if not model.is_file():
        pytest.skip("SmolLM2's GGUF is built by `make test-model`")
    assert trained_context(model) == (8192, "the GGUF's context_length")
    knobs = prof.default_knobs()
    check_launch(prof, knobs, build_launch(prof, knobs, 8000, "T").argv)  # 32768 with YaRN: asked for
    stretched = [a for a in build_launch(prof, knobs, 8000, "T").argv]
    at = stretched.index("--rope-scaling")
    del stretched[at : at + 6]  # the with_args YaRN flags gone: the same context, no scaling asked
    with pytest.raises(ProfileError, match=r"llamacpp-cpu\.toml: knobs\.context = 32768: a context of 32768 tokens"):
        check_launch(prof, knobs, stretched)


def test_the_fidelity_same_model_check_compares_the_model_files_not_the_names(fresh_frank_home):
    """A profile that serves the tiny model under SmolLM2's name is not SmolLM2: its fingerprint differs."""
    from frank import paths
    from frank.experiments.design import _model_fingerprint

    smollm2, gguf = load_profile("embedded-cpu-smollm2"), load_profile("llamacpp-cpu")
    if _model_fingerprint(smollm2) is None:
        pytest.skip("the models are built by `make test-model`")
    assert _model_fingerprint(smollm2) == _model_fingerprint(gguf)  # the GGUF's reference is that checkpoint
    user = paths.user_profiles_dir()
    user.mkdir(parents=True)
    text = (REPO / "frank" / "engine" / "profiles" / "embedded-cpu-smollm2.toml").read_text()
    impostor = text.replace('name = "embedded-cpu-smollm2"', 'name = "impostor"')
    impostor = re.sub(r'model = "@models/smollm2-135m[^"]*"', 'model = "@models/tiny-frank"', impostor)
    write(user, impostor, "impostor")
    fake = load_profile("impostor")
    assert fake.served_model_name == smollm2.served_model_name
    assert _model_fingerprint(fake) != _model_fingerprint(smollm2)
