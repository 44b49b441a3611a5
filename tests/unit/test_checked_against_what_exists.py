"""Hand-edited files checked against what they name, as an adversary would write them: each attempt must be
refused with a non-zero exit and FILE:LINE: field in its message, for the reason it is wrong (a campaign
part's profile, knobs, evidence run and revert measure; a profile's kind and a with_args that contradicts its
knob; a suite's version; a fidelity arm labelled as one model but serving another file). No engine starts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from frank.engine.profiles import ProfileError, load_profile_file
from frank.experiments.design import check_arm_profiles
from frank.experiments.tables import DesignError
from frank.paths import REPO_ROOT

CAMPAIGN = """version = 1
name = "t"

[[parts]]
name = "cache"
profile = "{profile}"
knobs = {{ {knobs} }}
state = "{state}"
design = "@designs/region-cache-on-off.toml"
{extra}"""


def campaign(tmp_path: Path, profile="embedded-cpu", knobs='region_cache = "on"', state="candidate", extra=""):
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(profile=profile, knobs=knobs, state=state, extra=extra))
    return path


@pytest.mark.parametrize(
    ("fields", "where", "reason"),
    [
        ({"profile": "no-such-profile"}, "6: parts[0].profile", "no profile named 'no-such-profile'"),
        ({"knobs": "no_such_knob = 1"}, "7: parts[0].knobs.no_such_knob", "has no knob 'no_such_knob'"),
        ({"knobs": 'region_cache = "sometimes"'}, "7: parts[0].knobs.region_cache", "'sometimes' is not one of"),
        (
            {"state": "served", "extra": '[[parts.evidence]]\nstate = "served"\nrun = "20260101-no-such-run"\n'},
            "12: parts[0].evidence[0].run",
            "no registered experiment '20260101-no-such-run'",
        ),
        (
            {
                "profile": "llamacpp-cpu",
                "knobs": "threads = 2",
                "extra": '[[parts.revert_rules]]\nname = "r"\nkind = "measure_worse"\n'
                'measure = "front_end_per_draw"\nmax_worse_pct = 5\n',
            },
            "13: parts[0].revert_rules[0].measure",
            "llama.cpp reports no queue time",
        ),
    ],
)
def test_a_campaign_part_naming_what_is_not_there_is_refused_at_init_and_status(
    frank_cli, fresh_frank_home, tmp_path, fields, where, reason
):
    path = campaign(tmp_path, **fields)
    done = frank_cli("campaign", "init", "--file", str(path))
    assert done.returncode != 0, done.stdout
    assert f"{path}:{where}: " in done.stderr and reason in done.stderr, done.stderr
    # a file recorded before what it names went away is refused on every later load, status included
    path.write_text(CAMPAIGN.format(profile="embedded-cpu", knobs='region_cache = "on"', state="candidate", extra=""))
    assert frank_cli("campaign", "init", "--file", str(path)).returncode == 0
    path.write_text(path.read_text() + '\n[[parts]]\nname = "more"\nprofile = "no-such-profile"\nstate = "candidate"\n')
    done = frank_cli("campaign", "status", "--file", str(path))
    assert done.returncode != 0 and f"{path}:13: parts[1].profile: no profile named" in done.stderr, done.stderr


def test_a_served_part_whose_run_is_of_another_design_is_refused(fresh_frank_home, tmp_path):
    from frank.campaign import actions
    from frank.campaign.parts import CampaignError
    from frank.experiments import registry

    other = REPO_ROOT / "frank" / "experiments" / "designs" / "seed-schedule-2.toml"
    run_id = registry.register(other).run_id
    ev = f'[[parts.evidence]]\nstate = "served"\nrun = "{run_id}"\n'
    path = campaign(tmp_path, state="served", extra=ev)
    with pytest.raises(CampaignError, match=rf"c\.toml:12: parts\[0\]\.evidence\[0\]\.run: run {run_id} is of design"):
        actions.init(path)


def test_frank_profiles_names_the_bad_profile_and_why(frank_cli, fresh_frank_home):
    user = fresh_frank_home / "config" / "profiles"
    user.mkdir(parents=True)
    bad = user / "bad.toml"
    bad.write_text('name = "bad"\nkind = "llama.cpp"\nmodel = "/m"\nserved_model_name = "x"\n')
    done = frank_cli("profiles")
    assert done.returncode == 1
    out = done.stdout + done.stderr
    assert f"{bad}:2: kind: 'llama.cpp' is not one of: vllm, llamacpp" in out, out
    assert "embedded-cpu" in done.stdout  # one bad file hides none of the others


PROFILE = """name = "mine"
kind = "llamacpp"
binary = "/usr/bin/true"
model = "/models/x.gguf"
served_model_name = "x"

[knobs.threads]
values = [2, 4]
default = 2
apply = "arg"
target = "--threads"
with_args = { "4" = ["--threads", "8"] }
"""


def test_a_with_args_may_not_contradict_its_knobs_value(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(PROFILE)
    with pytest.raises(ProfileError) as err:
        load_profile_file(path)
    assert str(err.value).startswith(f"{path}:12: knobs.threads.with_args.4: --threads 8 contradicts"), err.value
    # a table of named values (every value mapped to its flag value) is what with_args on its own flag is for
    path.write_text(
        PROFILE.replace('{ "4" = ["--threads", "8"] }', '{ "2" = ["--threads", "1"], "4" = ["--threads", "8"] }')
    )
    assert load_profile_file(path).knobs["threads"].with_args["4"] == {"--threads": "8"}


@pytest.mark.parametrize("version", ['"2"', "0", "-1", "true"])
def test_a_suites_bad_version_names_its_field(frank_cli, tmp_path, version):
    builtin = REPO_ROOT / "frank" / "episodes" / "suites" / "w01-mini.toml"
    text = re.sub(r"(?m)^version = .*$", f"version = {version}", builtin.read_text(), count=1)
    line = text.splitlines().index(f"version = {version}") + 1
    path = tmp_path / "suite.toml"
    path.write_text(text)
    done = frank_cli("episodes", "check", str(path))
    assert done.returncode != 0
    assert (
        f"{path}:{line}: version: expected a positive integer, got {version.strip(chr(34))!r}"
        in (done.stdout + done.stderr)
        or f"{path}:{line}: version: " in done.stdout + done.stderr
    ), done.stdout + done.stderr


def test_a_fidelity_arm_labelled_as_one_model_but_serving_another_file_is_refused(fresh_frank_home):
    """Off this machine no fingerprint can be taken: the model files decide, never the served names (two
    profiles that both call themselves "smollm2" but serve two files are two models)."""
    from frank.experiments.design import load_design

    user = fresh_frank_home / "config" / "profiles"
    user.mkdir(parents=True)
    for name, model in (("embedded-cpu-smollm2", "/nowhere/a"), ("llamacpp-cpu", "/nowhere/b.gguf")):
        text = (REPO_ROOT / "frank" / "engine" / "profiles" / f"{name}.toml").read_text()
        text = re.sub(r'(?m)^model = ".*"$', f'model = "{model}"', text, count=1)
        text = re.sub(r'(?m)^served_model_name = ".*"$', 'served_model_name = "smollm2"', text, count=1)
        (user / f"{name}.toml").write_text(text)
    path = REPO_ROOT / "frank" / "experiments" / "designs" / "body-smollm2.toml"
    design = load_design(path)
    assert design.fidelity is not None
    with pytest.raises(
        DesignError, match=r"arms\[1\]\.profile: .* serve different model files \(files /nowhere/b\.gguf"
    ):
        check_arm_profiles(design, str(path))
