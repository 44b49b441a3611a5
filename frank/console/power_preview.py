"""The power lines of the registration preview: how likely the design confirms a true effect of 2, 5 or 10%,
at the spread the newest A/A run on the same measure measured (frank.experiments.plan does the work)."""

from __future__ import annotations

from frank.experiments import plan
from frank.experiments.design import Design

EFFECTS_PCT = (2.0, 5.0, 10.0)


def power_lines(design: Design) -> list[str]:
    if design.kind not in ("blocks", "balanced"):
        return []
    found = plan.latest_aa_spread(design.measure)
    if found is None:
        return [
            f"power    no A/A run on {design.measure} yet: run frank/experiments/designs/aa-noise-floor.toml, then "
            f"`frank experiment plan DESIGN --noise RUN --effect-pct X`"
        ]
    spread, source = found
    lines = [f"power    at a spread of {spread:.3g}% ({source}):"]
    for effect in EFFECTS_PCT:
        p = plan.plan(design, spread, effect, source)

        def need(n: int | None) -> str:
            return "-" if n is None else str(n)

        lines.append(
            f"  true effect {effect:g}%: power {p.power:.2f}; {p.size_unit} for 80% {need(p.blocks_for_80)}, "
            f"for 95% {need(p.blocks_for_95)}"
        )
    return lines
