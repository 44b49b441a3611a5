"""Report plots as inline SVG, drawn with matplotlib (the `report` extra: `pip install 'frank[report]'`).

matplotlib is imported only here and only when a page is built, with the Agg backend (no display), text
kept as SVG text (searchable, small) and a fixed hash salt (the same report gives the same SVG).
"""

from __future__ import annotations

import io
from typing import Any

from frank.errors import FrankError

ARM_COLOURS = ("#1f6fb2", "#d0632b")  # treatment, control: distinguishable in grey and for red-green


def _plt() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise FrankError(
            "HTML reports draw their plots with matplotlib: pip install 'frank[report]' (or `make setup`)"
        ) from None
    matplotlib.use("Agg")
    matplotlib.rcParams.update(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": "frank",
            "font.size": 10,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    import matplotlib.pyplot as plt

    return plt


def _svg(fig: Any, plt: Any) -> str:
    out = io.StringIO()
    fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = out.getvalue()
    return text[text.index("<svg") :]


def values_by_block(blocks: list[dict[str, Any]], arms: tuple[str, str], measure: str) -> str:
    """Each block's value per arm, one line per arm (voided blocks marked)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    xs = [b["block"] for b in blocks]
    for arm, colour, marker in zip(arms, ARM_COLOURS, ("o", "s")):
        ys = [b["values"].get(arm) for b in blocks]
        pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=colour, label=arm, linewidth=1.5)
    for b in blocks:
        if b.get("voided"):
            ax.axvspan(b["block"] - 0.4, b["block"] + 0.4, color="#999999", alpha=0.2)
    ax.set_xticks(xs)
    ax.set_xlim(0.3, len(blocks) + 0.7)
    ax.set_xlabel("block")
    ax.set_ylabel(measure or "value")
    ax.set_title("per-block values per arm")
    ax.legend(frameon=False)
    return _svg(fig, plt)


def effects_by_block(blocks: list[dict[str, Any]], treatment: str, control: str, direction: str | None) -> str:
    """Effect per block in percent, (treatment - control) / control; a bar per block, the mean as a line."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 3.0))
    done = [b for b in blocks if b.get("effect_pct") is not None]

    def good(effect: float) -> bool:
        return effect < 0 if direction == "lower" else effect > 0

    ax.bar(
        [b["block"] for b in done],
        [b["effect_pct"] for b in done],
        color=[ARM_COLOURS[0] if good(b["effect_pct"]) else "#b8424a" for b in done],
        width=0.6,
    )
    ax.axhline(0, color="#333333", linewidth=0.8)
    if done:
        avg = sum(b["effect_pct"] for b in done) / len(done)
        ax.axhline(avg, color="#555555", linewidth=1, linestyle="--", label=f"mean {avg:+.2f}%")
        ax.legend(frameon=False)
    ax.set_xticks([b["block"] for b in blocks])
    ax.set_xlim(0.3, len(blocks) + 0.7)
    ax.set_xlabel("block")
    ax.set_ylabel("effect, %")
    ax.set_title(f"effect of {treatment} against {control} per block")
    return _svg(fig, plt)


def starts_by_arm(starts: list[dict[str, Any]], arms: tuple[str, str], measure: str) -> str:
    """Balanced designs: every start's value in run order, coloured by arm."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    for arm, colour, marker in zip(arms, ARM_COLOURS, ("o", "s")):
        pts = [(s["start"], s["value"]) for s in starts if s["arm"] == arm]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], color=colour, marker=marker, label=arm, s=50, zorder=3)
    ax.set_xticks(sorted({s["start"] for s in starts if s.get("start")}))
    ax.set_xlabel("engine start (run order)")
    ax.set_ylabel(measure or "value")
    ax.set_title("value per engine start")
    ax.legend(frameon=False)
    return _svg(fig, plt)


def criteria_bars(criteria: list[dict[str, Any]], arms: tuple[str, str]) -> str:
    """External designs: each criterion's aggregate per arm, side by side (one panel per criterion)."""
    plt = _plt()
    n = max(1, len(criteria))
    fig, axes = plt.subplots(1, n, figsize=(2.6 * n + 1, 3.0), squeeze=False)
    for ax, c in zip(axes[0], criteria):
        values = [c["treatment"], c["control"]]
        ax.bar([0, 1], [v or 0 for v in values], color=ARM_COLOURS, width=0.6)
        ax.set_xticks([0, 1], list(arms), rotation=15)
        ax.set_title(
            f"{c['aggregate']} of {c['measure']}\n{'met' if c['met'] else 'NOT met' if c['met'] is False else 'no data'}",  # noqa: E501
            fontsize=9,
        )
    fig.tight_layout()
    return _svg(fig, plt)


def draws_by_arm(draws: list[dict[str, Any]], arms: tuple[str, str]) -> str:
    """Episode designs: each draw's client seconds per arm, side by side, its passes written on the bar."""
    plt = _plt()
    numbers = sorted({d["draw"] for d in draws})
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    width = 0.38
    for k, (arm, colour) in enumerate(zip(arms, ARM_COLOURS)):
        for i, n in enumerate(numbers):
            for d in (d for d in draws if d["arm"] == arm and d["draw"] == n):
                x = i + (k - 0.5) * width
                ax.bar(x, d["total_s"], width=width, color=colour, label=arm if i == 0 else None)
                ax.annotate(f"{d['passed']}/{d['episodes']}", (x, d["total_s"]), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(numbers)), [f"draw {n}" for n in numbers])
    ax.set_ylabel("client seconds (passed / episodes)")
    ax.set_title("total time and passes per draw")
    ax.legend(frameon=False)
    return _svg(fig, plt)


def kl_by_set(sets: list[dict[str, Any]], arms: tuple[str, str]) -> str:
    """Fidelity: each set's mean KL per arm (log scale), and the control's KL plus the floor the treatment
    must stay under; a set an arm has no KL for says so instead of showing a bar."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    width = 0.38
    for i, row in enumerate(sets):
        for k, (key, arm, colour) in enumerate(zip(("treatment", "control"), arms, ARM_COLOURS)):
            x = i + (k - 0.5) * width
            if row[key] is None:
                ax.annotate("no KL", (x, 0.5), xycoords=("data", "axes fraction"), ha="center", rotation=90, fontsize=8)
            else:
                ax.bar(x, row[key], width=width, color=colour, label=arm if i == 0 else None)
        if row["control"] is not None and row["floor"] is not None:
            ax.hlines(row["control"] + row["floor"], i - width, i + width, colors="black", linestyles="dashed")
    if any(r[k] for r in sets for k in ("treatment", "control")):
        ax.set_yscale("log")
    ax.set_xticks(range(len(sets)), [r["name"] for r in sets])
    ax.set_ylabel("mean KL (top 64)")
    ax.set_title("KL per set (dashed: control + floor)")
    ax.legend(frameon=False)
    return _svg(fig, plt)


def values_by_setting(settings: list[dict[str, Any]], measure: str, pick: str | None) -> str:
    """A screen: every setting's values (one dot a repeat) and its median (a bar), the control first, the
    pick highlighted."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.42 * len(settings)))
    for row, s in enumerate(settings):
        colour = ARM_COLOURS[0] if s["name"] == pick else ARM_COLOURS[1] if s.get("is_control") else "#777777"
        xs = [v for v in s["values"] if v is not None]
        ax.scatter(xs, [row] * len(xs), color=colour, s=28, zorder=3)
        if s.get("median") is not None:
            ax.plot([s["median"]] * 2, [row - 0.3, row + 0.3], color=colour, linewidth=2)
    ax.set_yticks(range(len(settings)))
    ax.set_yticklabels([s["name"] + (" (control)" if s.get("is_control") else "") for s in settings])
    ax.invert_yaxis()
    ax.set_xlabel(measure or "value")
    ax.set_title("every setting's values per repeat (bar: median)")
    return _svg(fig, plt)


def spread_by_requests(rows: list[dict[str, Any]], model: list[dict[str, Any]]) -> str:
    """A noise study: the spread by requests measured a draw, one line per number of first requests dropped
    (solid: the mean, dashed: the median of steps), and the three-level model's spread (dotted)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    cmap = plt.get_cmap("viridis")
    dropped = sorted({r["dropped"] for r in rows})
    for aggregate, style in (("mean", "-"), ("median", "--")):
        for k, w in enumerate(dropped):
            pts = [
                (r["requests"], r["spread_pct"])
                for r in rows
                if r["aggregate"] == aggregate and r["dropped"] == w and r["spread_pct"] is not None
            ]
            if pts:
                ax.plot(
                    [p[0] for p in pts],
                    [p[1] for p in pts],
                    style,
                    marker="o",
                    markersize=3,
                    color=cmap(k / max(1, len(dropped) - 1) * 0.85),
                    label=f"{aggregate}, {w} dropped",
                )
        mine = [r for r in rows if r.get("design") and r["spread_pct"] is not None]
        for r in mine:
            ax.scatter([r["requests"]], [r["spread_pct"]], s=80, facecolors="none", edgecolors="black", zorder=4)
    pts = [(m["requests"], m["spread_pct"]) for m in model if m.get("spread_pct") is not None]
    if pts:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], ":", color="black", label="model")
    ax.set_xlabel("requests measured a draw")
    ax.set_ylabel("spread, %")
    ax.set_title("between-start spread by requests a cell (circled: the design)")
    ax.legend(frameon=False, fontsize=7, ncol=2)
    return _svg(fig, plt)
