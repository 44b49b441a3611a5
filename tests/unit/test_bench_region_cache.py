"""`frank bench region-cache`: the order of engine starts is balanced, reproducible from its seed, uniform, and
drawn as a registered balanced design draws its order."""

from __future__ import annotations

import math
from collections import Counter

from frank.console.cli import build_parser
from frank.experiments.bench import bench_order


def test_orders_are_balanced_and_reproducible():
    for n in (2, 3, 4):
        for seed in range(50):
            order = bench_order(n, seed)
            assert len(order) == 2 * n and order.count("on") == n == order.count("off")
            assert bench_order(n, seed) == order


def test_every_balanced_order_is_drawn_about_equally_often():
    counts = Counter(tuple(bench_order(4, seed)) for seed in range(7000))
    assert len(counts) == math.comb(8, 4) == 70
    assert min(counts.values()) > 60 and max(counts.values()) < 145  # about 100 each


def test_the_bench_order_is_the_registered_balanced_draw():
    from frank.experiments.design import load_design
    from frank.experiments.randomize import draw_balanced, draw_order
    from frank.paths import REPO_ROOT

    design = load_design(REPO_ROOT / "frank" / "experiments" / "designs" / "region-cache-on-off.toml")
    assert design.kind == "balanced"
    arms = tuple(a.name for a in design.arms)
    for seed in range(20):
        assert draw_balanced(arms, int(design.starts_per_arm), seed) == draw_order(design, seed)  # type: ignore[arg-type]


def test_the_cli_parses_the_registered_options():
    args = build_parser().parse_args(
        ["bench", "region-cache", "--json", "--starts-per-arm", "4", "--seed", "7", "--draws", "draw-1", "draw-2"]
    )
    assert (args.starts_per_arm, args.seed, args.draws, args.json) == (4, 7, ["draw-1", "draw-2"], True)


def test_full_scale_w01_runs_on_the_sliding_window_profile_unless_told():
    from frank.engine.profiles import load_profile
    from frank.experiments.bench import default_profile

    assert default_profile("w01-full") == "embedded-cpu-swa"
    assert default_profile("w01-mini") == default_profile("/some/recorded/workload") == "embedded-cpu"
    prof = load_profile("embedded-cpu-swa")
    assert prof.model == "@models/tiny-frank-swa" and prof.max_model_len >= 181_000
    assert "region_cache" in prof.knobs and prof.knobs["region_cache"].needs_restart is False
    args = build_parser().parse_args(["bench", "region-cache", "--workload", "w01-full"])
    assert args.profile is None  # resolved from the workload when the run starts
