"""`frank bench region-cache`: the order of engine starts is balanced, reproducible from its seed, uniform."""
from __future__ import annotations

import math
from collections import Counter

from console.cli import build_parser
from console.cli.bench_cmd import draw_order


def test_orders_are_balanced_and_reproducible():
    for n in (2, 3, 4):
        for seed in range(50):
            order = draw_order(n, seed)
            assert len(order) == 2 * n and order.count("on") == n == order.count("off")
            assert draw_order(n, seed) == order


def test_every_balanced_order_is_drawn_about_equally_often():
    counts = Counter(tuple(draw_order(4, seed)) for seed in range(7000))
    assert len(counts) == math.comb(8, 4) == 70
    assert min(counts.values()) > 60 and max(counts.values()) < 145  # about 100 each


def test_the_cli_parses_the_registered_options():
    args = build_parser().parse_args(["bench", "region-cache", "--json", "--starts-per-arm", "4", "--seed", "7",
                                      "--draws", "draw-1", "draw-2"])
    assert (args.starts_per_arm, args.seed, args.draws, args.json) == (4, 7, ["draw-1", "draw-2"], True)
