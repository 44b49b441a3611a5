from __future__ import annotations

import re
from pathlib import Path

import pytest

from frank.experiments import exact
from frank.experiments.design import DesignError, load_design, parse_design_text
from frank.paths import REPO_ROOT
from tests.unit.experiment_helpers import BALANCED_DESIGN, BLOCKS_DESIGN

DESIGNS = sorted((REPO_ROOT / "frank" / "experiments" / "designs").glob("*.toml"))


def test_blocks_design_parses_with_defaults() -> None:
    d = parse_design_text(BLOCKS_DESIGN, check_profiles=True)
    assert d.kind == "blocks" and d.blocks == 3 and d.starts == 6
    assert d.rule.require_all and d.rule.alpha is None
    assert d.arm("spec-2").knob_dict == {"num_speculative_tokens": 2}
    assert d.guards.no_failed_requests and not d.guards.prompt_token_ids_identical
    assert d.workload is not None and d.workload.mode == "full" and d.workload.requests == 2
    assert len(d.sha256) == 64


@pytest.mark.parametrize("path", DESIGNS, ids=[p.stem for p in DESIGNS])
def test_shipped_designs_are_valid(path: Path) -> None:
    d = load_design(path, check_profiles=True)
    exact.check_reachable(d, str(path))


def test_hash_ignores_formatting_but_not_values() -> None:
    base = parse_design_text(BLOCKS_DESIGN)
    reformatted = "# a comment\n" + BLOCKS_DESIGN.replace('name = "tiny"', 'name   =   "tiny"   # same')
    assert parse_design_text(reformatted).sha256 == base.sha256
    changed = parse_design_text(BLOCKS_DESIGN.replace("blocks = 3", "blocks = 4"))
    assert changed.sha256 != base.sha256
    # defaults are part of the canonical form: spelling one out changes nothing
    explicit = parse_design_text(BLOCKS_DESIGN.replace("requests = 2", "requests = 2\nwarmup_requests = 0"))
    assert explicit.sha256 == base.sha256


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('kind = "blocks"', 'kind = "latin"', "design.kind"),
        ("blocks = 3", "blocks = 0", "design.blocks"),
        ("blocks = 3", 'blocks = "3"', "design.blocks"),
        ('test = "sign"', 'test = "permutation"', "rule.test"),
        ('treatment = "spec-2"', 'treatment = "spec-3"', "rule.treatment"),
        ('control = "spec-4"', 'control = "spec-2"', "rule.control"),
        ('direction = "lower"', 'direction = "down"', "rule.direction"),
        ('direction = "lower"', 'direction = "lower"\nalpha = 1.5', "rule.alpha"),
        ('direction = "lower"', 'direction = "lower"\nrequire_all = false', "rule.alpha"),
        ('name = "time_per_verify_step"', 'name = "speed"', "measure.name"),
        ("requests = 2", "requests = 2\nwarmup_requests = 2", "workload.warmup_requests"),
        ('name = "tiny"', 'name = "tiny"\nmode = "stream"', "workload.mode"),
        ("max_retries = 1", "max_retries = -1", "failure.max_retries"),
        ('action = "retry"', 'action = "panic"', "failure.action"),
        ('name = "spec-2"', 'name = "spec-4"', "arms[1].name"),
        ('name = "spec-2"', 'name = "spec 2"', "arms[1].name"),
        (
            "knobs = { num_speculative_tokens = 2 }",
            "knobs = { num_speculative_tokens = [2] }",
            "arms[1].knobs.num_speculative_tokens",
        ),
        ("[design]", "[design]\nstarts_per_arm = 4", "design.starts_per_arm"),
        ("question = ", "questoin = ", "questoin"),
        ("[failure]", "[guards]\nchecks = [1]\n[failure]", "guards.checks[0]"),
    ],
)
def test_validation_names_the_field(old: str, new: str, field: str) -> None:
    assert old in BLOCKS_DESIGN
    with pytest.raises(DesignError) as err:
        parse_design_text(BLOCKS_DESIGN.replace(old, new, 1), "my.toml")
    # the file, the line of the field (tomllib gives none: frank.tomlfile finds the key's), the field
    assert re.match(rf"my\.toml:\d+: {re.escape(field)}:", str(err.value)), str(err.value)


def test_missing_fields_are_named() -> None:
    no_workload = BLOCKS_DESIGN.replace('[workload]\nname = "tiny"\nrequests = 2\n', "")
    with pytest.raises(DesignError, match=r"d\.toml: workload: missing required field"):
        parse_design_text(no_workload, "d.toml")
    with pytest.raises(DesignError, match=r"d\.toml:\d+: rule\.alpha: missing required field"):
        parse_design_text(BALANCED_DESIGN.replace("alpha = 0.05\n", ""), "d.toml")


def test_bad_toml_and_arm_count() -> None:
    with pytest.raises(DesignError, match="invalid TOML"):
        parse_design_text("name = ", "d.toml")
    one_arm = BLOCKS_DESIGN.split("[[arms]]")
    text = one_arm[0] + "[[arms]]" + one_arm[1] + one_arm[2][one_arm[2].index("[design]") :]
    with pytest.raises(DesignError, match=r"d\.toml: arms: a design compares exactly 2 arms, got 1"):
        parse_design_text(text, "d.toml")


def test_void_block_only_for_blocks() -> None:
    with pytest.raises(DesignError, match=r"failure\.action: only a 'blocks' design"):
        parse_design_text(BALANCED_DESIGN + '\n[failure]\naction = "void_block"\n', "d.toml")


def test_knob_values_are_checked_against_the_profile() -> None:
    bad = BLOCKS_DESIGN.replace("num_speculative_tokens = 2", "num_speculative_tokens = 3")
    parse_design_text(bad)  # syntax is fine; the profile check catches it
    with pytest.raises(DesignError, match=r"d\.toml:\d+: arms\[1\]\.knobs: .*num_speculative_tokens.*arm 'spec-2'"):
        parse_design_text(bad, "d.toml", check_profiles=True)
    unknown = BLOCKS_DESIGN.replace("num_speculative_tokens = 2", "spec_tokens = 2")
    with pytest.raises(DesignError, match=r"arms\[1\]\.knobs: .*unknown knob 'spec_tokens'.*arm 'spec-2'"):
        parse_design_text(unknown, "d.toml", check_profiles=True)


def test_a_rule_that_can_never_be_met_is_refused() -> None:
    four = parse_design_text(
        BLOCKS_DESIGN.replace("blocks = 3", "blocks = 4").replace(
            'direction = "lower"', 'direction = "lower"\nalpha = 0.05'
        )
    )
    assert exact.smallest_p(four) == pytest.approx(1 / 16)
    with pytest.raises(DesignError, match=r"rule\.alpha: 0\.05 can never be met: 4 blocks give at best p = 1/16"):
        exact.check_reachable(four, "d.toml")
    five = parse_design_text(
        BLOCKS_DESIGN.replace("blocks = 3", "blocks = 5").replace(
            'direction = "lower"', 'direction = "lower"\nalpha = 0.05'
        )
    )
    exact.check_reachable(five)  # 1/32 < 0.05
    two_plus_two = parse_design_text(BALANCED_DESIGN.replace("starts_per_arm = 3", "starts_per_arm = 2"))
    with pytest.raises(DesignError, match=r"2\+2 starts give at best p = 1/6"):
        exact.check_reachable(two_plus_two)
    exact.check_reachable(parse_design_text(BALANCED_DESIGN))  # 3+3: 1/20 = 0.05 is reachable


def test_external_design_needs_criteria() -> None:
    text = (REPO_ROOT / "frank" / "experiments" / "designs" / "seed-adoption.toml").read_text()
    d = parse_design_text(text)
    assert not d.runnable and d.rule.test == "criteria" and len(d.rule.criteria) == 3
    assert d.run_order[:2] == ("llamacpp-iq2", "llamacpp-iq2")
    with pytest.raises(DesignError, match=r"rule\.criteria\[1\]\.compare"):
        parse_design_text(text.replace('compare = "not_lower"', 'compare = "same"'), "d.toml")
    with pytest.raises(DesignError, match=r"design\.order\[0\]: 'gguf' is not an arm"):
        parse_design_text(text.replace('order = ["llamacpp-iq2"', 'order = ["gguf"'), "d.toml")


def _line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.parametrize(
    ("after", "field"),
    [
        ('kind = "blocks"', "design.colour"),
        ('name = "spec-4"', "arms[0].colour"),
        ('name = "spec-2"', "arms[1].colour"),
        ('name = "tiny"', "workload.colour"),
        ('test = "sign"', "rule.colour"),
        ("max_retries = 1", "failure.colour"),
        ('question = "Do 2', "colour"),
    ],
)
def test_an_unknown_key_is_refused_at_its_line_with_the_known_ones(after: str, field: str) -> None:
    line = next(line for line in BLOCKS_DESIGN.splitlines() if line.startswith(after))
    text = BLOCKS_DESIGN.replace(line, f"{line}\ncolour = 1", 1)
    with pytest.raises(DesignError) as err:
        parse_design_text(text, "d.toml")
    message = str(err.value)
    assert message.startswith(f"d.toml:{_line_of(text, 'colour')}: {field}: unknown field (known: "), message
    assert len(message.splitlines()) == 1, message  # nothing else is wrong


def test_a_table_spelled_close_to_a_field_is_not_taken_for_it() -> None:
    # `[Design]` is not `[design]`: refused at its header, and the missing [design] named too
    text = BLOCKS_DESIGN.replace("[design]", "[Design]")
    with pytest.raises(DesignError) as err:
        parse_design_text(text, "d.toml")
    message = str(err.value)
    assert message.startswith(f"d.toml:{_line_of(text, '[Design]')}: Design: unknown field"), message
    assert "d.toml: design: missing required field" in message


def test_every_problem_of_the_schema_is_refused_at_once_in_the_order_of_the_file() -> None:
    text = (
        BLOCKS_DESIGN.replace('kind = "blocks"', 'kind = "blocks"\ncolour = 1')
        .replace("requests = 2", 'requests = "two"')
        .replace("max_retries = 1", "max_retries = 99")
    )
    with pytest.raises(DesignError) as err:
        parse_design_text(text, "d.toml")
    lines = str(err.value).splitlines()
    assert [re.sub(r": .*", "", line.split(" ", 1)[1]) for line in lines] == [
        "design.colour",
        "workload.requests",
        "failure.max_retries",
    ], lines
    assert [line.split(" ", 1)[0] for line in lines] == [
        f"d.toml:{_line_of(text, 'colour')}:",
        f"d.toml:{_line_of(text, 'requests = ')}:",
        f"d.toml:{_line_of(text, 'max_retries')}:",
    ]
    assert "must be at most 10, got 99" in lines[2]


def test_what_ties_fields_together_is_refused_at_once_too() -> None:
    text = BLOCKS_DESIGN.replace('treatment = "spec-2"', 'treatment = "spec-3"').replace(
        "requests = 2", "requests = 2\nwarmup_requests = 5"
    )
    with pytest.raises(DesignError) as err:
        parse_design_text(text, "d.toml")
    lines = str(err.value).splitlines()
    assert lines == [
        f"d.toml:{_line_of(text, 'warmup_requests')}: workload.warmup_requests: 5 warm-up requests leave nothing "
        "to measure of 2",
        f"d.toml:{_line_of(text, 'treatment')}: rule.treatment: 'spec-3' is not an arm (spec-4, spec-2)",
    ]
