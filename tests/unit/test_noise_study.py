"""The noise study (issue 49): the three-level decomposition on synthetic data whose variance components are
known, the client's step times, the `median` aggregate as a design field, and the report of a registered run
whose cells an injected executor fills with replay records (the real engine's run:
tests/integration/test_noise_engine.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from frank.engine import measures
from frank.experiments import plan, registry
from frank.experiments.design import DesignError, load_design, parse_design_text
from frank.experiments.journal import CellResult
from frank.experiments.noise import decompose
from frank.experiments.noise_report import finish_study, format_noise, mark_study, noise_report, study_effect_pct
from frank.experiments.randomize import Slot
from frank.experiments.runner import run_experiment
from frank.paths import REPO_ROOT
from frank.workloads.record import start_measures, tallies_of

MU = 0.010  # seconds a step


def synthetic(
    rng: np.random.Generator,
    *,
    settings: int = 2,
    starts: int = 20,
    requests: int = 8,
    steps: int = 40,
    sd_start: float = 0.04,
    sd_request: float = 0.02,
    sd_step: float = 0.10,
    sd_workload: float = 0.20,
) -> tuple[dict[str, dict[str, float]], dict[str, str], dict[str, dict[str, list[float]]]]:
    """Request values (the mean of their steps), settings and step times drawn from the three-level model
    with the given relative standard deviations, and a fixed level per request (the workload)."""
    workload = rng.normal(0.0, sd_workload * MU, requests)
    values: dict[str, dict[str, float]] = {}
    times: dict[str, dict[str, list[float]]] = {}
    setting_of: dict[str, str] = {}
    for g in range(settings):
        for k in range(starts):
            s = f"g{g}-s{k}"
            setting_of[s] = f"g{g}"
            a = rng.normal(0.0, sd_start * MU)
            values[s], times[s] = {}, {}
            for r in range(requests):
                b = rng.normal(0.0, sd_request * MU)
                x = MU * (1 + 0.1 * g) + workload[r] + a + b + rng.normal(0.0, sd_step * MU, steps)
                times[s][f"r{r}"] = list(x)
                values[s][f"r{r}"] = float(x.mean())
    return values, setting_of, times


def test_the_decomposition_finds_known_components() -> None:
    values, setting_of, times = synthetic(np.random.default_rng(49))
    d = decompose(values, setting_of, times)
    mean = d.mean
    assert (d.starts, d.settings, d.requests, d.steps_per_request) == (40, 2, 8, 40.0)
    # the true sds relative to the grand mean (the second setting runs 10% slower)
    for name, true in (("step", 0.10), ("request", 0.02), ("start", 0.04)):
        got = d.sd_pct(name)
        assert got is not None and got == pytest.approx(100 * true * MU / mean, rel=0.25), name
    # the workload's own differences (the same in every start) stay out of the noise
    assert d.to_json()["workload_sd_pct"] > 5 * (d.sd_pct("request") or 0)
    step, cell = d.shares_of_step(), d.shares_of_cell()
    assert sum(v or 0 for v in step.values()) == pytest.approx(1.0)
    assert sum(v or 0 for v in cell.values()) == pytest.approx(1.0)
    assert max(step, key=lambda k: step[k] or 0) == "step"  # a step's variance is mostly its own
    assert max(cell, key=lambda k: cell[k] or 0) == "start"  # a cell's value is mostly its start's
    # the model's spread of two starts: sqrt(2) x the cell's sd, shrinking with requests to the start level
    assert d.spread_pct(8) == pytest.approx(math.sqrt(2) * d.to_json()["cell_sd_pct"])
    assert d.spread_pct(1) > d.spread_pct(8) > d.spread_pct(1000) > math.sqrt(2) * (d.sd_pct("start") or 0) * 0.99
    lo, hi = d.observed_sd_ci_pct() or (0, 0)
    assert lo < d.to_json()["cell_sd_pct"] < hi


def test_a_level_with_no_noise_is_estimated_near_zero_and_clipped_not_negative() -> None:
    # 5% request noise over 4 requests moves a start's mean request by 2.5%: none of it is the start's
    values, setting_of, times = synthetic(np.random.default_rng(7), sd_start=0.0, sd_request=0.05, requests=4)
    d = decompose(values, setting_of, times)
    start = d.level("start")
    assert start.raw is not None and start.variance == max(0.0, start.raw)  # clipped, the raw estimate kept
    assert (d.sd_pct("start") or 0) < 1.0
    assert (d.sd_pct("request") or 0) == pytest.approx(5.0 * MU / d.mean, rel=0.25)
    assert (d.shares_of_cell()["start"] or 0) < 0.15


def test_without_step_times_the_request_level_holds_the_steps_noise() -> None:
    values, setting_of, times = synthetic(np.random.default_rng(3), sd_request=0.0)
    with_steps = decompose(values, setting_of, times)
    without = decompose(values, setting_of)
    assert without.level("step").variance is None and "no step times" in without.level("step").note
    assert "steps' noise" in without.level("request").note
    # 10% step noise over 40 steps is 1.6% a request: it lands in the request level without step times
    assert (without.sd_pct("request") or 0) == pytest.approx(100 * 0.10 / math.sqrt(40) * MU / without.mean, rel=0.25)
    assert (with_steps.sd_pct("request") or 0) < 0.6 * (without.sd_pct("request") or 0)
    # the start level and the cell's variance do not depend on whether the steps were seen
    assert with_steps.cell_variance() == pytest.approx(without.cell_variance(), rel=1e-9)


def test_requests_missing_from_a_start_and_levels_that_cannot_be_told_apart() -> None:
    values = {"s1": {"r1": 1.0, "r2": 2.0, "r3": 3.0}, "s2": {"r1": 1.1, "r2": 2.1}}
    d = decompose(values, {"s1": "g", "s2": "g"})
    assert d.dropped_requests == ("r3",) and d.requests == 2
    single = {"s1": {"r": 1.0}, "s2": {"r": 1.2}, "s3": {"r": 0.9}}
    one_request = decompose(single, dict.fromkeys(single, "g"))
    assert one_request.level("request").variance is None and "one request a start" in one_request.level("request").note
    assert one_request.level("start").variance is not None and "request level too" in one_request.level("start").note
    one_start = decompose({"s1": {"r1": 1.0, "r2": 1.1}, "s2": {"r1": 1.0, "r2": 1.3}}, {"s1": "a", "s2": "b"})
    assert one_start.level("start").variance is None and one_start.spread_pct() is None
    with pytest.raises(ValueError, match="no request is in every start"):
        decompose({"s1": {"a": 1.0}, "s2": {"b": 1.0}}, {"s1": "g", "s2": "g"})


def test_step_times_group_a_steps_tokens_and_refuse_steps_run_together() -> None:
    # llama.cpp: each token its own event; a step of 3 tokens arrives as a burst
    at = [0.100, 0.110, 0.1101, 0.1102, 0.121, 0.1211, 0.130]
    assert measures.step_times(at, 3, 0.030) == pytest.approx((0.010, 0.011, 0.009))
    assert measures.step_times(at, None) == pytest.approx(tuple(b - a for a, b in zip(at, at[1:])))
    # two steps' output in one event: the client cannot tell them apart
    assert measures.step_times([0.1, 0.12, 0.13], 3, 0.03) is None
    assert measures.step_times([0.1], 1) is None and measures.step_times(at, 0) is None
    assert measures.median_step_s([0.01, 0.5, 0.011]) == 0.011 and measures.median_step_s([]) is None
    # forty 10 ms steps, the 20th's output held back until the 21st's (a character split over tokens): the
    # gap holding both is left out, the other 38 steps are the request's
    arrivals = [0.05 + 0.01 * k for k in range(41)]
    held = arrivals[:20] + arrivals[21:]
    times = measures.step_times(held, 40, 0.4)
    assert times is not None and len(times) == 38 and max(times) == pytest.approx(0.01)
    # five of forty hidden is more than HIDDEN_STEPS_SHARE (10%): the steps cannot be told apart
    assert measures.step_times(arrivals[:10] + arrivals[15:], 40, 0.4) is None
    assert len(measures.step_times(arrivals[:10] + arrivals[14:], 40, 0.4) or ()) == 32  # four: the 4 longest out
    # a client that read two steps' events at once (one arrival time) did not see the step between them
    late = arrivals[:30] + [arrivals[31], arrivals[31]] + arrivals[32:]
    assert measures.step_times(late, 40, 0.4) == pytest.approx([0.01] * 38)
    # an API server that fell behind sends two steps' events a sliver apart: the sliver is no step it timed
    sliver = arrivals[:30] + [arrivals[31] - 1e-5, arrivals[31]] + arrivals[32:]
    assert measures.step_times(sliver, 40, 0.4) == pytest.approx([0.01] * 38, abs=2e-5)
    # without the server's decode time the client's gaps are taken as they came: the sliver is a step
    assert len(measures.step_times(sliver, 40) or ()) == 40
    # a burst of six events in a third of a millisecond (vLLM's output sent late on a busy machine): not steps
    burst = arrivals[:10] + [arrivals[15] - 1e-4 * k for k in range(5, 0, -1)] + arrivals[15:]
    assert measures.step_times(burst, 40, 0.4) is None


AA = """
name = "noise-aa"
question = "Where does the spread of two identical starts come from?"
profile = "embedded-cpu"

[[arms]]
name = "a1"
knobs = {{ num_speculative_tokens = 4 }}

[[arms]]
name = "a2"
knobs = {{ num_speculative_tokens = 4 }}

[design]
kind = "blocks"
blocks = {blocks}

[workload]
name = "tiny"
requests = 5
warmup_requests = 1

[measure]
name = "time_per_verify_step"
{aggregate}
[rule]
test = "sign"
treatment = "a2"
control = "a1"
direction = "lower"
"""


def test_the_median_aggregate_is_a_design_field_that_keeps_older_hashes() -> None:
    mean = parse_design_text(AA.format(blocks=3, aggregate=""))
    explicit = parse_design_text(AA.format(blocks=3, aggregate='aggregate = "mean"\n'))
    median = parse_design_text(AA.format(blocks=3, aggregate='aggregate = "median"\n'))
    assert mean.measure_aggregate == "mean" and "measure_aggregate" not in mean.canonical
    assert explicit.sha256 == mean.sha256  # the default written out is the same design
    assert median.measure_aggregate == "median" and median.sha256 != mean.sha256
    with pytest.raises(DesignError, match="measure.aggregate"):
        other = AA.format(blocks=3, aggregate='aggregate = "median"\n')
        parse_design_text(other.replace("time_per_verify_step", "tokens_per_s"))
    with pytest.raises(DesignError, match="measure.aggregate"):
        parse_design_text(AA.format(blocks=3, aggregate='aggregate = "mode"\n'))
    # the shipped designs freeze as before: their registered runs still load
    for path in sorted((REPO_ROOT / "frank/experiments/designs").glob("*.toml")):
        design = load_design(path)
        assert design.measure_aggregate == "mean" and "measure_aggregate" not in design.canonical, path.name


class RecordingExecutor:
    """Stands in for the engine: writes each start's replay records (5 requests of 12 steps, the first one a
    slow warm-up) drawn from the three-level model, the rig beside it, and returns the start's measure as a
    cell takes it."""

    def __init__(self, seed: int = 11, sd_start: float = 0.05) -> None:
        self.rng = np.random.default_rng(seed)
        self.sd_start = sd_start
        self.workload = self.rng.normal(0.0, 0.1 * MU, 5)

    def precheck(self, run: Any) -> None:
        pass

    def cleanup(self, run: Any, attempt: Any) -> str:
        return "no engine was left"

    def execute(self, run: Any, slot: Slot, attempt: int, note: Any) -> CellResult:
        folder = run.cell_dir(slot.slot, attempt) / "replay"
        folder.mkdir(parents=True)
        a = self.rng.normal(0.0, self.sd_start)
        records = []
        for i in range(5):
            level = MU * (1 + a) + self.workload[i] + (3 * MU if i == 0 else 0.0) + self.rng.normal(0.0, 0.01 * MU)
            steps = level + self.rng.normal(0.0, 0.1 * MU, 12)
            at = list(0.05 + np.concatenate([[0.0], np.cumsum(steps)]))
            records.append(
                {
                    "id": f"r{i}",
                    "draw": "draw-1",
                    "index": i,
                    "attempt": 1,
                    "status": "ok",
                    "client": {"ttft_s": at[0], "total_s": at[-1], "output_at_s": at},
                    "completion_tokens": 13,
                    "server": {"attributed": True, "decode_s": float(steps.sum()), "decode_steps": 12.0},
                }
            )
        (folder / "draw-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        m = start_measures(tallies_of({"draw-1": records}, run.design.workload.warmup_requests))
        rig = {
            "facts": {"gpus": None, "gpus_reason": "no GPU telemetry (test)", "host": {}},
            "conditions": {"gpus": None, "steal_percent": {"min": 0.0, "mean": 100 * a + 10, "max": 30.0, "n": 9}},
        }
        value = m.time_per_verify_step_median if run.design.measure_aggregate == "median" else m.time_per_verify_step
        return CellResult(value=float(value or 0.0), measure=run.design.measure, dir=str(folder), rig=rig)


@pytest.fixture
def study(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> registry.Run:
    monkeypatch.setenv("FRANK_HOME", str(tmp_path / "home"))
    path = tmp_path / "aa.toml"
    path.write_text(AA.format(blocks=6, aggregate=""))
    run = registry.register(path, seed=3)
    mark_study(run, 2.5)
    assert run_experiment(run, RecordingExecutor()).reason == "finished"
    return run


def test_the_report_of_a_run_names_each_levels_share_and_agrees_with_plan(study: registry.Run) -> None:
    r = noise_report(study)
    assert study_effect_pct(study) == 2.5 == r.effect_pct
    assert r.settings == {"a1=a2": ["a1", "a2"]}  # an A/A design's arms are one setting
    d = r.decomposition
    assert d is not None and (d.starts, d.settings, d.requests, d.steps_per_request) == (12, 1, 4, 12.0)
    step, cell = d.shares_of_step(), d.shares_of_cell()
    assert all(v is not None for v in (*step.values(), *cell.values()))
    assert max(cell, key=lambda k: cell[k] or 0) == "start"  # 5% start noise against 1% a request
    # the design's own row is what `frank experiment plan --noise RUN` takes, and asks what plan asks
    row = r.design_row()
    assert row is not None and (row.aggregate, row.dropped, row.requests) == ("mean", 1, 4)
    spread, effects, _ = plan.spread_from_run(study.run_id)
    assert row.spread_pct == pytest.approx(spread) and row.effects == effects == 6
    assert row.blocks_for_80 == plan.plan(study.design, spread, 2.5).blocks_for_80
    # every (dropped, requests) the records allow, for the mean and the median of steps
    assert {(x.aggregate, x.dropped, x.requests) for x in r.shrink} == {
        (agg, w, n) for agg in ("mean", "median") for w in range(5) for n in range(1, 6 - w)
    }
    # the slow first request: keeping it in a one-request cell measures the warm-up, dropping it does not
    first = next(x for x in r.shrink if (x.aggregate, x.dropped, x.requests) == ("mean", 0, 1))
    assert first.mean is not None and row.mean is not None and first.mean > 2 * row.mean
    # the rig beside each start explains it: its steal time was drawn with the start's own level
    steal = next(e for e in r.explained if e["condition"] == "steal_percent")
    assert steal["rho"] > 0.8 and steal["starts"] == 12
    text = format_noise(r)
    for words in ("step within a request", "request within a start", "start within a setting", "drop 1"):
        assert words in text
    assert "*" in text  # the design's own cell of the table


def test_the_cli_report_its_html_and_the_jobs_files(study: registry.Run, frank_cli: Any) -> None:
    out = frank_cli.json("experiment", "noise", "--report", study.run_id)
    assert set(out["decomposition"]["levels"]) == {"step", "request", "start"}
    assert out["effect_pct"] == 2.5 and out["decomposition"]["levels"]["start"]["share_of_cell"] > 0.5
    assert noise_report(study, 5.0).effect_pct == 5.0  # --effect-pct
    page = study.folder / "page.html"
    result = frank_cli("experiment", "noise", "--report", study.run_id, "--html", str(page))
    assert result.returncode == 0, result.stderr
    html = page.read_text()
    assert "<svg" in html and 'id="levels"' in html and 'id="shrink"' in html
    assert "noise study:" in finish_study(study)
    saved = json.loads((study.folder / "noise.json").read_text())
    assert saved["run_id"] == study.run_id and (study.folder / "noise.txt").read_text().startswith("noise study of run")
    from frank.console.cli import build_parser
    from frank.errors import FrankError

    args = build_parser().parse_args(["experiment", "noise"])
    with pytest.raises(FrankError, match="give a design file"):
        args.func(args)


def test_every_checkout_file_and_frank_command_the_noise_device_script_uses_exists() -> None:
    """scripts/device_noise.sh (the GPU session's run): the files it reads from the checkout, the lines of the
    shipped design its variants rewrite, and every `frank ...` command line it runs, parsed by frank's CLI."""
    import re
    import shlex

    from frank.console.cli import build_parser
    from tests.device_scripts import script_text

    text = script_text(REPO_ROOT / "scripts/device_noise.sh")
    assert "DESIGNS=$TREE/frank/experiments/designs" in text
    used = set(re.findall(r"\$TREE/([\w./-]+)", text))
    used |= {"frank/experiments/designs/" + p for p in re.findall(r"\$DESIGNS/([\w.-]+)", text)}
    used |= set(re.findall(r"\bscripts/[\w.-]+\.(?:sh|py|txt)", text))
    assert "frank/experiments/designs/noise-moe.toml" in used and "scripts/stage_cpu_experts_device.sh" in used
    missing = sorted(p for p in used if not (REPO_ROOT / p).exists())
    assert not missing, f"device_noise.sh uses files the checkout lacks: {missing}"
    design = (REPO_ROOT / "frank/experiments/designs/noise-moe.toml").read_text()
    for line in (
        'name = "noise-moe"',
        'profile = "llamacpp-gpu-moe"',
        "cpu_experts_sched = 2, cpu_moe_layers = 4, cpu_threads = 16",
        'aggregate = "mean"',
    ):
        assert line in design, f"the variants rewrite {line!r}"
    for key in ("requests", "warmup_requests", "blocks"):
        assert re.search(rf"^{key} = [0-9]+", design, re.M), key
    parser = build_parser()
    command = r"(?:\bfrank|-m frank\.console\.cli) ((?:experiment|jobs|engine|telemetry|model) [^|>);\n\\]*)"
    code = "\n".join(line.split(" # ")[0] for line in text.splitlines() if not line.lstrip().startswith("#"))
    commands = [m.group(1) for m in re.finditer(command, code)]
    assert len(commands) >= 15 and any("--html" in c for c in commands)
    for line in commands:
        command = re.sub(r"\s\d$", "", line.strip())  # a file descriptor's redirect (2>/dev/null)
        command = re.sub(r"\$\{?(stop_after|EFFECT)\}?", "3", command).replace("$MODEL", "frank-moe-gpu")
        words = [w for w in shlex.split(re.sub(r"\$\{?\w+\}?", "x", command)) if w not in ("||", "exit")]
        try:
            parser.parse_args(words)
        except SystemExit:
            pytest.fail(f"device_noise.sh runs `frank {line}`: frank's CLI refuses it")
