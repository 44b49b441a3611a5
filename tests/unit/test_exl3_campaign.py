"""The campaign's method on exllamav3's CPU experts (issue 50), without a GPU: the pool's screen and the seed's
schedule test on exl3-gpu-moe through the shipped loaders (their EXL3_* names read by the wheel), the exl3
example's parts awaiting evidence the GPU machine has not made yet, a rejected part shown with the blocks that
decided it, and scripts/device_exl3_campaign.sh's dependencies."""

from __future__ import annotations

import re
import shlex
import shutil
import zipfile
from pathlib import Path

import pytest

from frank.campaign import actions
from frank.campaign.parts import CampaignError, parse_campaign_text
from frank.engine.kinds import build_launch
from frank.engine.profiles import load_profile
from frank.experiments import exact
from frank.experiments.design import load_design
from frank.experiments.screen import load_screen
from frank.paths import REPO_ROOT
from scripts.check_exl3_names import wheel_names

WHEEL = REPO_ROOT / ".device/exl3/exllamav3-1.6.5-py3-none-any.whl"
SCREEN = REPO_ROOT / "frank/experiments/screens/exl3-pool.toml"
DESIGNS = REPO_ROOT / "frank/experiments/designs"
SCHED = DESIGNS / "exl3-cpu-experts-sched.toml"
SCRIPT = REPO_ROOT / "scripts/device_exl3_campaign.sh"


@pytest.fixture(scope="module")
def wheel() -> Path:
    assert WHEEL.is_file(), f"{WHEEL} is missing: `make exl3-wheel` downloads it"
    return WHEEL


def test_the_pool_screen_loads_with_its_pick_rule_and_every_setting_a_knob_of_exl3_gpu_moe() -> None:
    screen = load_screen(SCREEN, check_profiles=True)  # the loader `frank experiment screen` registers with
    assert screen.profile == "exl3-gpu-moe" and screen.repeats == 3 and len(screen.settings) >= 5
    assert (screen.pick.rule, screen.pick.min_wins) == ("best_median", 3)  # written before it runs
    assert screen.confirm.stop_when_decided and screen.confirm.min_blocks >= 5
    assert screen.design.measure == "time_per_verify_step" and screen.direction == "lower"
    control = screen.control.knob_dict
    assert control == {
        "cpu_split": 21,
        "cpu_threads": "auto",
        "cpu_slots": 4,
        "cpu_experts_sched": 2,
        "cpu_placement": "dynamic",
    }
    changed = {a.name: {k: v for k, v in a.knob_dict.items() if control[k] != v} for a in screen.candidates}
    assert all(len(knobs) == 1 for knobs in changed.values()), changed  # one knob a candidate
    by_knob: dict[str, list[object]] = {}
    for knobs in changed.values():
        for k, v in knobs.items():
            by_knob.setdefault(k, []).append(v)
    # threads (several, below the default's auto), slots, the pinning (the schedule) and the placement
    assert set(by_knob["cpu_threads"]) == {4, 8, 12} and set(by_knob["cpu_slots"]) == {2, 8}
    assert by_knob["cpu_experts_sched"] == [1] and by_knob["cpu_placement"] == ["static"]
    assert "cpu_split" not in by_knob  # held at the (fitted) split


def test_every_exl3_name_the_screens_settings_set_is_read_by_the_wheel(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FRANK_EXL3_PYTHON", "/opt/exl3/bin/python3")
    profile = load_profile("exl3-gpu-moe")
    known = wheel_names(wheel)
    envs = {}
    for arm in load_screen(SCREEN).settings:
        env = build_launch(profile, profile.resolve_knobs(arm.knob_dict), 8093, "T").env
        envs[arm.name] = {k: v for k, v in env.items() if k.startswith("EXL3_")}
        unknown = sorted(set(envs[arm.name]) - set(known))
        assert not unknown, f"{arm.name} sets {unknown}, which exllamav3 1.6.5 does not read"
    assert envs["slots-8"]["EXL3_MOE_CPU_SLOTS"] == "8" and envs["default"]["EXL3_MOE_CPU_SLOTS"] == "4"
    assert envs["sched-1"]["EXL3_MOE_CPU_PIN"] == "0" and envs["static"]["EXL3_MOE_CPU_SWAP"] == "0"
    assert envs["threads-12"]["EXL3_MOE_CPU_THREADS"] == "12"


def test_the_slots_knob_takes_what_exllamav3_accepts_at_the_lines_the_profile_cites(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        host = zf.read("exllamav3/model/moe_cpu_host.py").decode().splitlines()
        handoff = zf.read("exllamav3/exllamav3_ext/cpu/moe_handoff.h").decode().splitlines()
    assert 'int(os.environ.get("EXL3_MOE_CPU_SLOTS", 4))' in host[99 - 1]
    assert "assert 1 <= self.num_slots <= 8" in host[100 - 1]
    assert handoff[55 - 1] == "#define MOE_MAX_SLOTS 8"
    assert "self.next_slot = (self.next_slot + 1) % self.num_slots" in host[1437 - 1]
    profile_text = (REPO_ROOT / "frank/engine/profiles/exl3-gpu-moe.toml").read_text()
    for cite in ("moe_cpu_host.py:99", "moe_cpu_host.py:100", "moe_handoff.h:55", "moe_cpu_host.py:1436-1437"):
        assert cite in profile_text, cite
    knob = load_profile("exl3-gpu-moe").knobs["cpu_slots"]
    assert knob.target == "EXL3_MOE_CPU_SLOTS" and knob.default == 4 and knob.needs_restart
    assert knob.values == (1, 2, 4, 8)  # all within exllamav3's 1..8


def test_the_schedule_test_is_the_seeds_on_exllamav3() -> None:
    design = load_design(SCHED, check_profiles=True)
    exact.check_reachable(design, str(SCHED))
    seed = load_design(DESIGNS / "cpu-experts-sched.toml")  # the one llama.cpp ran
    assert design.profile == "exl3-gpu-moe" and design.kind == "blocks" and (design.blocks or 0) >= 5
    assert design.stop_when_decided
    rule = design.rule
    assert (rule.test, rule.treatment, rule.control, rule.direction, rule.require_all) == (
        "sign",
        "sched-2",
        "sched-1",
        "lower",
        True,
    )
    assert (design.workload, design.measure, design.fidelity) == (seed.workload, seed.measure, seed.fidelity)
    one, two = design.arm("sched-1").knob_dict, design.arm("sched-2").knob_dict
    assert {k for k in one if one[k] != two[k]} == {"cpu_experts_sched"}


def test_the_exl3_example_says_each_part_awaits_its_evidence_and_is_never_decided(fresh_frank_home: Path) -> None:
    """Nothing has run on the GPU machine yet: each part names the files it awaits and what makes them. When
    the GPU session lands them, the example names them as evidence, and this test changes with it."""
    from frank.console.cli.campaign_cmd import _human_status
    from frank.console.sources.campaign import part_view

    init = actions.init(example="exl3")
    assert init.created and init.parts == ("exl3-pool-pick", "exl3-schedule-2")
    status = actions.status()
    parts = {p.name: p for p in status.parts}
    expected = {
        "exl3-pool-pick": [
            "@screens/exl3-pool-h200.json",
            "@designs/exl3-pool-confirm.toml",
            "@designs/exl3-pool-confirm-h200.csv",
        ],
        "exl3-schedule-2": ["@designs/exl3-cpu-experts-sched-h200.csv"],
    }
    for name, files in expected.items():
        part = parts[name]
        assert part.state == "candidate" and part.evidence == () and part.runs == ()
        assert [a.file for a in part.awaiting] == files
        assert all(not a.there and not Path(a.path).exists() for a in part.awaiting)
        assert all("scripts/device_exl3_campaign.sh" in a.made_by for a in part.awaiting)
        assert part.up_next.startswith("awaits its evidence, not decided: ") and files[-1] in part.up_next
        assert "frank experiment report RUN --csv" in part.awaiting[-1].made_by
        json = part.to_json()
        assert json["evidence"] == [] and [a["there"] for a in json["awaiting"]] == [False] * len(files)
        view = part_view(part)  # the console's campaign screen
        assert view.evidence.startswith(f"awaited: {len(files)} file") and view.evidence.endswith("not decided")
        assert "none yet: not decided" in view.detail and f"{files[-1]} (" in view.detail
    assert parts["exl3-pool-pick"].knobs == {}  # the pick is the screen's, not known before it runs
    assert parts["exl3-pool-pick"].design_sha256 is None  # its design is written by the screen's report
    text = _human_status(status)
    assert text.count("no evidence yet: not decided") == 2 and text.count(": not made yet; made by ") == 4
    assert "results:" not in text and "confirmed" not in text


def test_a_rejected_part_is_shown_rejected_with_the_blocks_that_decided_it(fresh_frank_home: Path) -> None:
    """The llama.cpp campaign's real runs (moe.toml): its parts are what an exl3 part rejected under its rule
    will look like, through the same code."""
    from frank.console.cli.campaign_cmd import _human_status
    from frank.console.sources.campaign import part_view

    actions.init(example="moe")
    status = actions.status()
    pool = next(p for p in status.parts if p.name == "pool-threads-12")
    assert pool.state == "rejected"
    entry = pool.evidence[0]
    assert entry["decision"] == "not confirmed" and entry["state"] == "rejected"
    blocks = entry["blocks"]
    assert [b["block"] for b in blocks] == list(range(1, 9))  # blocks 9-10 were never run
    assert [b["sign"] for b in blocks] == ["+"] * 7 + ["-"]
    assert blocks[7]["effect_pct"] == pytest.approx(1.48, abs=0.005)
    assert str(entry["stopped"]).startswith("stopped when decided after block 8 of 10")
    line = "blocks 1 -8.52% +, 2 -5.25% +, 3 -8.59% +, 4 -14.77% +, 5 -1.57% +, 6 -11.95% +, 7 -5.78% +, 8 +1.48% -"
    text = _human_status(status)
    assert "pool-threads-12  REJECTED" in text and f"{line}; stopped when decided after block 8 of 10" in text
    assert "blocks 1 -24.66% +, 2 +6.48% -; stopped when decided after block 2 of 8" in text  # schedule-2
    view = part_view(pool)
    assert view.state == "rejected" and view.evidence.startswith("rejected: not confirmed, p = 9/256")
    assert line in view.detail and "stopped when decided after block 8 of 10" in view.detail


def test_an_awaited_csv_is_decided_again_once_it_is_there(fresh_frank_home: Path) -> None:
    """A part awaiting its confirmation's CSV; the llama.cpp confirmation's real CSV stands in for the one the
    GPU machine will bring (the display is what is tested): decided by the design's rule, as a test's outcome,
    with its blocks; the part stays a candidate until the file names it as evidence."""
    from frank.console.sources.campaign import part_view

    folder = fresh_frank_home / "c"
    folder.mkdir()
    path = folder / "campaign.toml"
    path.write_text(
        'version = 1\nname = "t"\n\n[[parts]]\nname = "pick"\nprofile = "llamacpp-gpu-moe"\n'
        'knobs = { cpu_threads = 12 }\nstate = "candidate"\ndesign = "@designs/cpu-pool-confirm.toml"\n\n'
        '[[parts.awaits]]\nfile = "confirm.csv"\nwhat = "the confirmation\'s values"\n'
        'made_by = "frank experiment report RUN --csv confirm.csv"\n'
    )
    actions.init(path)
    before = actions.status(path).parts[0]
    assert before.evidence == () and before.awaits_evidence
    assert (
        before.up_next
        == "awaits its evidence, not decided: confirm.csv, made by frank experiment report RUN --csv confirm.csv"
    )
    shutil.copy(DESIGNS / "cpu-pool-confirm-h200.csv", folder / "confirm.csv")
    after = actions.status(path).parts[0]
    assert after.state == "candidate" and not after.awaits_evidence and after.awaiting[0].there
    (entry,) = after.evidence
    assert entry["awaited"] and entry["state"] == "testing" and entry["ok"]
    assert (entry["decision"], entry["p_fraction"], len(entry["blocks"])) == ("not confirmed", "9/256", 8)
    assert after.up_next.startswith("its awaited evidence is here (") and "decides not confirmed" in after.up_next
    detail = part_view(after).detail
    assert "results (awaited, here now): not confirmed" in detail and "8 +1.48% -" in detail


def test_awaits_belong_to_undecided_parts_and_keep_older_parts_hashes(tmp_path: Path) -> None:
    part = (
        'version = 1\nname = "t"\n\n[[parts]]\nname = "p"\nprofile = "llamacpp-gpu-moe"\nstate = "{state}"\n'
        'design = "@designs/cpu-pool-confirm.toml"\n{evidence}{awaits}'
    )
    evidence = '\n[[parts.evidence]]\nstate = "rejected"\nresults = "@designs/cpu-pool-confirm-h200.csv"\n'
    awaits = '\n[[parts.awaits]]\nfile = "@designs/x.csv"\nmade_by = "a run"\n'
    path = tmp_path / "c.toml"
    with pytest.raises(
        CampaignError, match=r"c\.toml:\d+: parts\[0\]\.awaits: a part that is rejected has its evidence"
    ):
        parse_campaign_text(part.format(state="rejected", evidence=evidence, awaits=awaits), path)
    with pytest.raises(CampaignError, match=r"parts\[0\]\.awaits\[0\]\.file: '\.\./x\.csv' resolves outside"):
        parse_campaign_text(
            part.format(state="candidate", evidence="", awaits=awaits.replace("@designs/", "../")), path
        )
    with pytest.raises(CampaignError, match=r"parts\[0\]\.awaits\[0\]\.made_by"):
        parse_campaign_text(part.format(state="candidate", evidence="", awaits=awaits.replace("a run", " ")), path)
    plain = parse_campaign_text(part.format(state="candidate", evidence="", awaits=""), path).parts[0]
    waiting = parse_campaign_text(part.format(state="candidate", evidence="", awaits=awaits), path).parts[0]
    assert "awaits" not in plain.canonical_json()  # parts recorded before the field keep their hash
    assert waiting.sha256 != plain.sha256  # and an awaited file is part of the frozen part


def test_every_file_design_and_frank_command_the_exl3_campaign_script_uses_exists() -> None:
    """scripts/device_exl3_campaign.sh (the GPU session's run): the checkout files it reads, device_exl3.sh's
    setup phases called (not copied), the order (screen, confirmation, schedule test, serve), and every
    `frank ...` command line it runs, parsed by frank's CLI."""
    from frank.console.cli import build_parser
    from tests.device_scripts import script_text

    text = script_text(SCRIPT)
    used = set(re.findall(r"\$TREE/([\w./-]+)", text))
    used |= {f"frank/experiments/designs/{n}.toml" for n in re.findall(r"^SCHED=([\w.-]+)$", text, re.M)}
    used |= {f"frank/experiments/screens/{n}.toml" for n in re.findall(r"^SCREEN=([\w.-]+)$", text, re.M)}
    used |= set(re.findall(r"\bscripts/[\w.-]+\.(?:sh|py|txt)", text))
    assert {
        "scripts/device_exl3.sh",
        "frank/experiments/screens/exl3-pool.toml",
        "frank/experiments/designs/exl3-cpu-experts-sched.toml",
        "scripts/stage_exl3_device.sh",
    } <= used
    missing = sorted(p for p in used if not (REPO_ROOT / p).exists())
    assert not missing, f"device_exl3_campaign.sh uses files the checkout lacks: {missing}"
    setup = (REPO_ROOT / "scripts/device_exl3.sh").read_text()
    assert "FRANK_EXL3_SETUP_ONLY=1" in text and 'source "$W/exl3-env.sh"' in text
    assert "SETUP_ONLY=${FRANK_EXL3_SETUP_ONLY:-}" in setup and '>"$W/exl3-env.sh"' in setup
    assert "mark setup" in setup and "pip install" not in text  # the setup is device_exl3.sh's, not a copy
    order = [text.index(s) for s in ('run_until "$SRUN"', 'run_until "$CRUN"', 'run_until "$SRUN2"', "campaign serve")]
    assert order == sorted(order), "the screen, then the confirmation, then the schedule test, then serving"
    for line in ("cpu_split = 21,", "blocks = 8"):  # what the script rewrites in the shipped files
        assert line in SCREEN.read_text() + SCHED.read_text(), line
    parser = build_parser()
    command = r"(?:\bfrank|-m frank\.console\.cli) ((?:experiment|jobs|engine|campaign|replay) [^|>&);\n\\]*)"
    code = "\n".join(line.split(" # ")[0] for line in text.splitlines() if not line.lstrip().startswith("#"))
    commands = [m.group(1) for m in re.finditer(command, code)]
    assert len(commands) >= 20 and any("--design-out" in c for c in commands)
    for line in commands:
        words = re.sub(r"\$\{?(stop_after|EFFECT|SPREAD)\}?", "3", line.strip()).replace("$knobs", "")
        words = re.sub(r"\$\{?\w+\}?", "x", re.sub(r"\s\d$", "", words))
        args = [w for w in shlex.split(words) if w not in ("||", "exit")]
        try:
            parser.parse_args(args)
        except SystemExit:
            pytest.fail(f"device_exl3_campaign.sh runs `frank {line}`: frank's CLI refuses it")


def test_a_new_sessions_machine_goes_on_with_the_last_sessions_runs(tmp_path: Path) -> None:
    """scripts/device_runs.sh's restore_work, as device_exl3_campaign.sh calls it with FRANK_EXL3_RESUME_FROM:
    the last call's tarball unpacked into a fresh work folder, the runs' journals and ids kept, the setup's
    marks dropped (a new machine sets up again), the call count going on; a folder that ran here is left."""
    import subprocess
    import tarfile

    packed = tmp_path / "packed"
    for name, text in {
        "done/setup": "t", "done/model": "t", "done/wheels": "t", "done/served-pick": "t",
        "run-exl3-pool": "20261208-exl3-pool-ab12\n", "campaign-calls": "3\n",
        "home/data/runs/experiments/20261208-exl3-pool-ab12/journal.jsonl": '{"event": "cell_done"}\n',
        "designs/exl3-pool-h200.json": "{}",
    }.items():  # fmt: skip
        (packed / name).parent.mkdir(parents=True, exist_ok=True)
        (packed / name).write_text(text)
    tarball = tmp_path / "exl3-campaign-3.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        for item in sorted(packed.iterdir()):
            tar.add(item, arcname=item.name)

    def restore(work: Path, source: Path = tarball) -> subprocess.CompletedProcess[str]:
        script = f'. {REPO_ROOT}/scripts/device_runs.sh; restore_work "$1" "$2" served-pick'
        return subprocess.run(["bash", "-c", script, "-", str(source), str(work)], capture_output=True, text=True)

    work = tmp_path / "work"
    assert restore(work).returncode == 0
    assert sorted(p.name for p in (work / "done").iterdir()) == ["served-pick"]
    assert (work / "run-exl3-pool").read_text() == "20261208-exl3-pool-ab12\n"
    assert (work / "campaign-calls").read_text() == "3\n"
    assert (work / "home/data/runs/experiments/20261208-exl3-pool-ab12/journal.jsonl").exists()
    # this machine's own work since then is never replaced by the tarball again
    (work / "campaign-calls").write_text("4\n")
    (work / "done/setup").write_text("t")
    assert restore(work).returncode == 0
    assert (work / "campaign-calls").read_text() == "4\n" and (work / "done/setup").exists()
    missing = restore(tmp_path / "other", tmp_path / "absent.tar.gz")
    assert missing.returncode == 1 and "absent.tar.gz: no such file" in missing.stderr
    # the script packs what a later session needs to resume: the runs' ids and the call count
    text = SCRIPT.read_text()
    assert 'keep+=("${f##*/}")' in text and "campaign-calls)" in text
    assert 'restore_work "$RESUME" "$W" served-pick' in text
