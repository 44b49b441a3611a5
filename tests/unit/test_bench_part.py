"""`frank bench part`: the parts and knobs it lists, its options, its refusals, and the registered designs."""

from __future__ import annotations

import json

import pytest

from frank.console.cli import build_parser
from frank.errors import FrankError
from frank.experiments.bench import BenchOptions, parse_base_knobs, run_part
from frank.plugins.front_end.catalog import PARTS


def test_list_prints_each_part_with_its_knob(frank_cli):
    out = frank_cli("bench", "part", "--list", "--json", timeout=60)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    listed = {p["name"]: p["knob"] for p in rows if p["name"] in PARTS}
    assert listed == {"detok-tail": "detok_tail", "block-hash-memo": "block_hash_memo", "held-prompt": "held_prompt"}
    # the other vLLM plugins follow, each with its verdict (tests/unit/test_plugin_compat.py checks them)
    assert [p["name"] for p in rows if p["name"] not in PARTS] == ["region-cache", "idle-release", "shm-idle"]
    assert all(isinstance(p["verified_vllm"], list) and isinstance(p["compatible"], bool) for p in rows)


def test_the_quick_check_parses():
    args = build_parser().parse_args(
        [
            "bench",
            "part",
            "detok-tail",
            "--workload",
            "w01-full",
            "--starts-per-arm",
            "1",
            "--draws",
            "draw-1",
            "--json",
        ]
    )
    assert (args.part, args.starts_per_arm, args.draws, args.output_tokens) == ("detok-tail", 1, ["draw-1"], 4)
    assert args.base_knobs is None  # the region cache on in both arms unless --with says otherwise


def test_refusals_name_the_bad_input():
    with pytest.raises(FrankError, match="expected one of detok-tail, block-hash-memo, held-prompt"):
        run_part("no-such-part", BenchOptions())
    with pytest.raises(FrankError, match="at least 1"):
        run_part("detok-tail", BenchOptions(starts_per_arm=0))
    with pytest.raises(FrankError, match="KNOB=VALUE"):
        parse_base_knobs(["region_cache"], "detok_tail")
    with pytest.raises(FrankError, match="the part's own knob"):
        parse_base_knobs(["detok_tail=on"], "detok_tail")
    assert parse_base_knobs(["region_cache=on"], "detok_tail") == {"region_cache": "on"}


@pytest.mark.parametrize("name", list(PARTS))
def test_each_part_has_a_registrable_8_start_design(name, tmp_path):
    from frank.experiments.design import canonical_dict, load_design

    design = load_design(f"frank/experiments/designs/part-{name}.toml", check_profiles=True)
    assert design.profile == "embedded-cpu-swa" and design.starts_per_arm == 4
    assert design.workload.name == "w01-full" and design.workload.output_tokens == 4
    assert design.measure == "client_time_per_draw" and design.guards.outputs_identical
    knobs = {a.name: a.knob_dict for a in design.arms}
    assert knobs[f"{name}-on"] == {PARTS[name].knob: "on", "region_cache": "on"}
    assert knobs[f"{name}-off"] == {PARTS[name].knob: "off", "region_cache": "on"}
    frozen = canonical_dict(design)
    assert frozen["workload"]["output_tokens"] == 4 and frozen["guards"]["outputs_identical"] is True


def test_held_prompts_second_design_decides_on_the_seeds_front_end_measure():
    from frank.experiments.design import load_design

    first = load_design("frank/experiments/designs/part-held-prompt.toml", check_profiles=True)
    second = load_design("frank/experiments/designs/part-held-prompt-front-end.toml", check_profiles=True)
    assert second.measure == "front_end_per_draw" and first.measure == "client_time_per_draw"
    assert second.sha256 != first.sha256  # a new registration, not the first design re-read
    # everything but the measure, the name and the question is the first design's
    assert [(a.name, a.knob_dict) for a in second.arms] == [(a.name, a.knob_dict) for a in first.arms]
    assert (second.workload, second.guards, second.starts_per_arm) == (
        first.workload,
        first.guards,
        first.starts_per_arm,
    )


def test_output_tokens_are_an_engine_mode_setting():
    from frank.experiments.design import DesignError, parse_design_text

    text = open("frank/experiments/designs/part-detok-tail.toml").read()
    with pytest.raises(DesignError, match="output_tokens"):
        parse_design_text(text.replace('mode = "engine"', 'mode = "full"'), "part.toml")
    old = parse_design_text(open("frank/experiments/designs/region-cache-on-off.toml").read(), "rc.toml")
    from frank.experiments.design import canonical_dict

    frozen = canonical_dict(old)  # a design without the new keys freezes as it did before them
    assert "output_tokens" not in frozen["workload"] and "outputs_identical" not in frozen["guards"]
