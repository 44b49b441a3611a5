"""The noise study of a run (`frank experiment noise`): where its measure's start-to-start spread comes from,
read from the run's cells, their replay records and the rig beside them.

For every finished start the per-request records give each measured request's value (the design's measure
taken on that request alone, with frank.engine.measures' definitions: `REQUEST_VALUES`) and, for time per
verify step, its steps' times as the client saw them (frank.engine.measures.step_times). From them:

- `decomposition`: the variance split into step / request / start (frank.experiments.noise), over the
  design's measured requests (its own warm-up dropped), each level's share of a step and of a start value;
- `shrink`: how the between-start spread shrinks with the requests per cell and with the first requests
  dropped, for every (dropped, requests) the records allow and each aggregate the measure has (the mean, and
  for time per verify step the median of steps). Each start's value is the measure over those requests,
  computed as a cell computes it (frank.workloads.record.start_measures); the spread is what `frank experiment
  plan --noise` takes from a run (the standard deviation of the block effects, or sqrt(2) x the pooled
  coefficient of variation of a balanced design's starts), with the blocks the plan then asks for
  `effect_pct` at 80% power under the design's own rule;
- `model`: the decomposition's spread for 1..N requests a cell;
- `starts`: each start's value and the rig's conditions while it replayed (frank.telemetry.rig), and
  `explained`: Spearman's rank correlation across starts between a start's deviation from its setting's
  mean and each condition that varied (a noisy start explained, not guessed at).

A run registered by `frank experiment noise DESIGN` carries `noise-study.json` (the effect to plan for); its
job writes this report (noise.json, noise.txt, noise.html) into the run folder when it finishes.
docs/measures.md documents the JSON.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

from frank import paths, readfile
from frank.engine import measures
from frank.errors import FrankError
from frank.experiments import plan as planning
from frank.experiments.design import MEDIANS, Design
from frank.experiments.journal import fold, read_events
from frank.experiments.noise import LEVELS, WORDS, Decomposition, decompose
from frank.workloads.record import ReplayRecord, as_records, start_measures, tallies_of
from frank.workloads.replay import read_records

if TYPE_CHECKING:
    from frank.experiments.registry import Run

STUDY_FILE = "noise-study.json"  # in a run folder: registered as a noise study (its effect to plan for)
DEFAULT_EFFECT_PCT = 3.0  # issue 49: a 3% part confirmed in 10 blocks
MAX_DROPPED = 8  # the shrink table drops at most this many first requests


class NoiseError(FrankError):
    """The run cannot be studied (the message says why)."""


def _verify_step(rec: ReplayRecord) -> float | None:
    v = rec.server.values if rec.server is not None and rec.attributed else None
    return None if v is None or not v.decode_steps else measures.time_per_verify_step(v.decode_s, v.decode_steps)


def _client_total(rec: ReplayRecord) -> float | None:
    return rec.client.total_s if rec.client is not None else None


def _tokens_per_s(rec: ReplayRecord) -> float | None:
    total = _client_total(rec)
    return measures.ratio(float(rec.completion_tokens or 0), total)


def _front_end(rec: ReplayRecord) -> float | None:
    return rec.server.values.front_end_s if rec.server is not None and rec.attributed else None


def _wait_step(rec: ReplayRecord) -> float | None:
    return rec.server.cpu_expert_wait_step_s if rec.server is not None and rec.attributed else None


# A design measure taken on one request alone (the same definitions a start's measure sums).
REQUEST_VALUES: dict[str, Callable[[ReplayRecord], float | None]] = {
    "time_per_verify_step": _verify_step,
    "front_end_per_draw": _front_end,
    "total_replay_time": _client_total,
    "client_time_per_draw": _client_total,
    "tokens_per_s": _tokens_per_s,
    "cpu_expert_wait_per_step": _wait_step,
}


@dataclass(frozen=True)
class StartData:
    """One finished start: where it sits in the run, its value, its records by draw, the rig beside it."""

    start: int  # 1-based run order
    arm: str
    block: int | None
    setting: str
    value: float  # the cell's value (the design's measure and aggregate)
    records: dict[str, list[ReplayRecord]]  # draw -> the latest record of each request, in draw order
    rig: dict[str, Any] | None

    def measured(self, warmup: int, limit: int | None = None) -> list[ReplayRecord]:
        """Ok records past the first `warmup` of each draw (and before warmup + limit)."""
        end = None if limit is None else warmup + limit
        return [
            r
            for recs in self.records.values()
            for r in recs
            if r.ok and r.index >= warmup and (end is None or r.index < end)
        ]

    def value_over(self, measure: str, aggregate: str, dropped: int, requests: int) -> float | None:
        """The start's measure over each draw's requests dropped..dropped+requests-1, as a cell takes it."""
        subset = {d: [r for r in recs if r.index < dropped + requests] for d, recs in self.records.items()}
        m = start_measures(tallies_of(subset, dropped)).to_json()
        value = m[MEDIANS[measure]] if aggregate == "median" else m[measure]
        return None if value is None else float(value)


def settings_of(design: Design) -> dict[str, str]:
    """arm -> its setting's name: arms that start the engine the same way (profile and knobs) are one setting,
    named by their arms ("a1=a2")."""
    by_key: dict[tuple[str, tuple[tuple[str, Any], ...]], list[str]] = {}
    for arm in design.arms:
        by_key.setdefault((arm.profile, arm.knobs), []).append(arm.name)
    return {name: "=".join(names) for names in by_key.values() for name in names}


def load_starts(run: Run) -> list[StartData]:
    """Every finished start of a run that replayed a workload (voided blocks left out)."""
    design = run.design
    if design.workload is None:
        raise NoiseError(f"run {run.run_id}: a noise study reads replays; this design runs episodes or none")
    progress = fold(read_events(run.journal_path))
    settings = settings_of(design)
    out = []
    for slot in run.slots:
        done = progress.done(slot.slot)
        if done is None or (slot.block is not None and slot.block in progress.voided) or not done.dir:
            continue
        folder = Path(done.dir)
        records: dict[str, list[ReplayRecord]] = {}
        for path in sorted(folder.glob("*.jsonl")):
            latest: dict[str, ReplayRecord] = {}
            for rec in as_records(read_records(path)):
                latest[rec.id] = rec
            records[path.stem] = sorted(latest.values(), key=lambda r: r.index)
        out.append(
            StartData(slot.slot + 1, slot.arm, slot.block, settings[slot.arm], float(done.value), records, done.rig)
        )
    return out


# -- the report ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShrinkRow:
    aggregate: str  # mean | median
    dropped: int  # first requests of each draw left out
    requests: int  # requests of each draw measured
    starts: int  # starts with a value
    mean: float | None
    start_sd_pct: float | None  # pooled within-setting standard deviation of the start values, % of the mean
    spread_pct: float | None  # what `plan --noise` takes: the block effects' sd (blocks), sqrt(2) x CV (balanced)
    spread_from: str  # "block effects" | "starts"
    effects: int  # block effects (blocks) or starts (balanced) the spread rests on
    blocks_for_80: int | None  # the design's test at this spread for effect_pct, 80% power
    design: bool = False  # the design's own warm-up, requests and aggregate

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class NoiseReport:
    run_id: str
    name: str
    measure: str
    aggregate: str  # the design's
    kind: str
    profile: str
    settings: dict[str, list[str]]  # setting -> its arms
    design_warmup: int
    design_requests: int | None  # measured requests a draw (None: every one)
    effect_pct: float
    decomposition: Decomposition | None
    decomposition_note: str
    model: list[dict[str, Any]]  # per requests a cell: the decomposition's spread and shares
    shrink: list[ShrinkRow]
    starts: list[dict[str, Any]]
    explained: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def design_row(self) -> ShrinkRow | None:
        return next((r for r in self.shrink if r.design), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "name": self.name,
            "measure": self.measure,
            "aggregate": self.aggregate,
            "kind": self.kind,
            "profile": self.profile,
            "settings": self.settings,
            "design_warmup": self.design_warmup,
            "design_requests": self.design_requests,
            "effect_pct": self.effect_pct,
            "decomposition": None if self.decomposition is None else self.decomposition.to_json(),
            "decomposition_note": self.decomposition_note,
            "model": self.model,
            "shrink": [r.to_json() for r in self.shrink],
            "starts": self.starts,
            "explained": self.explained,
            "notes": self.notes,
        }


def study_effect_pct(run: Run) -> float:
    """The effect a noise study plans for (its noise-study.json), else DEFAULT_EFFECT_PCT."""
    path = run.folder / STUDY_FILE
    if not path.is_file():
        return DEFAULT_EFFECT_PCT
    value = readfile.read_object(path).get("effect_pct")
    return float(value) if isinstance(value, (int, float)) and value > 0 else DEFAULT_EFFECT_PCT


def mark_study(run: Run, effect_pct: float) -> None:
    """Mark a registered run as a noise study: its job writes the report when it finishes."""
    paths.write_private(run.folder / STUDY_FILE, json.dumps({"study": "noise", "effect_pct": effect_pct}) + "\n")


def is_study(run_folder: Path) -> bool:
    return (run_folder / STUDY_FILE).is_file()


def noise_report(run: Run, effect_pct: float | None = None) -> NoiseReport:
    design = run.design
    effect = study_effect_pct(run) if effect_pct is None else effect_pct
    if design.measure not in REQUEST_VALUES:
        raise NoiseError(f"run {run.run_id}: {design.measure!r} is not a replay measure a noise study can split")
    starts = load_starts(run)
    if not starts:
        raise NoiseError(f"run {run.run_id}: no finished start yet (frank experiment status {run.run_id})")
    assert design.workload is not None  # load_starts refused a design without one
    warmup = design.workload.warmup_requests
    settings: dict[str, list[str]] = {}
    for arm, setting in settings_of(design).items():
        settings.setdefault(setting, []).append(arm)
    decomposition, note = _decompose(design, starts, warmup)
    per_draw = min((len(recs) for s in starts for recs in s.records.values()), default=0)
    notes = []
    if per_draw == 0:
        notes.append("a start has a draw with no record")
    shrink = _shrink(design, starts, per_draw, effect, warmup) if per_draw else []
    model = []
    if decomposition is not None:
        for n in range(1, max(per_draw - warmup, decomposition.requests) + 1):
            model.append(
                {
                    "requests": n,
                    "spread_pct": decomposition.spread_pct(n),
                    "shares_of_cell": decomposition.shares_of_cell(n),
                }
            )
    return NoiseReport(
        run_id=run.run_id,
        name=design.name,
        measure=design.measure,
        aggregate=design.measure_aggregate,
        kind=design.kind,
        profile=design.profile,
        settings=settings,
        design_warmup=warmup,
        design_requests=design.workload.requests - warmup if design.workload.requests else None,
        effect_pct=effect,
        decomposition=decomposition,
        decomposition_note=note,
        model=model,
        shrink=shrink,
        starts=[_start_row(s) for s in starts],
        explained=_explained(starts),
        notes=notes,
    )


def _decompose(design: Design, starts: list[StartData], warmup: int) -> tuple[Decomposition | None, str]:
    value_of = REQUEST_VALUES[design.measure]
    values: dict[str, dict[str, float]] = {}
    steps: dict[str, dict[str, tuple[float, ...]]] = {}
    for s in starts:
        key = str(s.start)
        values[key], steps[key] = {}, {}
        for rec in s.measured(warmup):
            v = value_of(rec)
            if v is None:
                continue
            values[key][f"{rec.draw}/{rec.id}"] = v
            times = rec.step_times() if design.measure in MEDIANS else None
            if times is not None:
                steps[key][f"{rec.draw}/{rec.id}"] = times
    setting_of = {str(s.start): s.setting for s in starts}
    try:
        return decompose(values, setting_of, steps), ""
    except ValueError as exc:
        return None, str(exc)


def _shrink(design: Design, starts: list[StartData], per_draw: int, effect: float, warmup: int) -> list[ShrinkRow]:
    aggregates = ("mean", "median") if design.measure in MEDIANS else ("mean",)
    limit = design.workload.requests if design.workload is not None else None
    design_n = (per_draw if limit is None else min(limit, per_draw)) - warmup
    rows = []
    for aggregate in aggregates:
        for dropped in range(min(per_draw - 1, MAX_DROPPED) + 1):
            for n in range(1, per_draw - dropped + 1):
                values = {s.start: s.value_over(design.measure, aggregate, dropped, n) for s in starts}
                mine = aggregate == design.measure_aggregate and dropped == warmup and n == design_n
                rows.append(_row(design, starts, values, aggregate, dropped, n, effect, mine))
    return rows


def _row(
    design: Design,
    starts: list[StartData],
    values: Mapping[int, float | None],
    aggregate: str,
    dropped: int,
    n: int,
    effect: float,
    mine: bool,
) -> ShrinkRow:
    got = [v for v in values.values() if v is not None]
    mean = statistics.fmean(got) if got else None
    by_setting: dict[str, list[float]] = {}
    for s in starts:
        v = values[s.start]
        if v is not None:
            by_setting.setdefault(s.setting, []).append(v)
    ss = sum(sum((x - statistics.fmean(xs)) ** 2 for x in xs) for xs in by_setting.values())
    df = sum(len(xs) - 1 for xs in by_setting.values())
    sd_pct = 100.0 * math.sqrt(ss / df) / abs(mean) if df and mean else None
    spread, source, count = _spread(design, starts, values, by_setting)
    blocks = None
    if spread is not None and spread > 0:
        try:
            blocks = planning.plan(design, spread, effect, "noise study").blocks_for_80
        except planning.PlanError:
            blocks = None
    return ShrinkRow(aggregate, dropped, n, len(got), mean, sd_pct, spread, source, count, blocks, mine)


def _spread(
    design: Design, starts: list[StartData], values: Mapping[int, float | None], by_setting: Mapping[str, list[float]]
) -> tuple[float | None, str, int]:
    """The spread `frank experiment plan --noise` would take from these start values."""
    if design.kind == "blocks":
        rule = design.rule
        cells: dict[int, dict[str, float]] = {}
        for s in starts:
            v = values[s.start]
            if v is not None and s.block is not None:
                cells.setdefault(s.block, {})[s.arm] = v
        effects = [
            (c[rule.treatment] - c[rule.control]) / c[rule.control] * 100.0
            for c in cells.values()
            if rule.treatment in c and rule.control in c and c[rule.control]
        ]
        return (statistics.stdev(effects) if len(effects) >= 2 else None), "block effects", len(effects)
    cvs = [
        (statistics.variance(xs) / statistics.fmean(xs) ** 2, len(xs) - 1) for xs in by_setting.values() if len(xs) > 1
    ]
    dof = sum(d for _, d in cvs)
    if not dof:
        return None, "starts", 0
    return math.sqrt(sum(c * d for c, d in cvs) / dof) * math.sqrt(2.0) * 100.0, "starts", dof + len(cvs)


# -- the rig beside each start ------------------------------------------------------------------------

# (name, how to read it from a cell's rig conditions): the quantities `explained` correlates with the starts
CONDITIONS: tuple[tuple[str, Callable[[dict[str, Any]], float | None]], ...] = (
    ("gpu_sm_clock_mhz", lambda c: _gpu_mean(c, "sm_clock_mhz")),
    ("gpu_mem_clock_mhz", lambda c: _gpu_mean(c, "mem_clock_mhz")),
    ("gpu_temperature_c", lambda c: _gpu_mean(c, "temperature_c")),
    ("gpu_power_w", lambda c: _gpu_mean(c, "power_w")),
    ("gpu_throttled_share", lambda c: _throttled(c)),
    ("cpu_mhz", lambda c: _span_mean(c.get("cpu_mhz"))),
    ("steal_percent", lambda c: _span_mean(c.get("steal_percent"))),
    ("others_percent", lambda c: _span_mean(c.get("others_percent"))),
    ("self_percent", lambda c: _span_mean(c.get("self_percent"))),
    ("engine_percent", lambda c: _span_mean(c.get("engine_percent"))),
)
# clock event reasons that hold a GPU back under load ("gpu_idle" and the set application clocks are not)
SLOWDOWNS = ("sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")


def _span_mean(span: Any) -> float | None:
    return float(span["mean"]) if isinstance(span, Mapping) and span.get("mean") is not None else None


def _gpu_mean(cond: dict[str, Any], key: str) -> float | None:
    values = [_span_mean(g.get(key)) for g in cond.get("gpus") or ()]
    got = [v for v in values if v is not None]
    return statistics.fmean(got) if got else None


def _throttled(cond: dict[str, Any]) -> float | None:
    """The largest share of samples any GPU spent slowed down by power or heat."""
    shares = [
        max((share for name, share in (g.get("throttle") or {}).items() if name in SLOWDOWNS), default=0.0)
        for g in cond.get("gpus") or ()
        if g.get("throttle_read")
    ]
    return max(shares) if shares else None


def _start_row(s: StartData) -> dict[str, Any]:
    cond = (s.rig or {}).get("conditions") or {}
    row: dict[str, Any] = {"start": s.start, "arm": s.arm, "block": s.block, "setting": s.setting, "value": s.value}
    row["conditions"] = {name: read(cond) for name, read in CONDITIONS} if cond else None
    row["throttle"] = sorted(
        {name for g in cond.get("gpus") or () for name, share in (g.get("throttle") or {}).items() if share > 0}
    )
    facts = (s.rig or {}).get("facts") or {}
    row["link"] = [
        f"gen{g.get('pcie_gen')} x{g.get('pcie_width')} of gen{g.get('pcie_gen_max')} x{g.get('pcie_width_max')}"
        for g in facts.get("gpus") or ()
    ]
    row["rig"] = s.rig
    return row


def _explained(starts: list[StartData]) -> list[dict[str, Any]]:
    """Spearman's rho (and its p) across starts between each start's deviation from its setting's mean, in
    percent, and each rig condition that varied between the starts."""
    by_setting: dict[str, list[float]] = {}
    for s in starts:
        by_setting.setdefault(s.setting, []).append(s.value)
    means = {k: statistics.fmean(v) for k, v in by_setting.items()}
    out = []
    for name, read in CONDITIONS:
        pairs = []
        for s in starts:
            cond = (s.rig or {}).get("conditions")
            x = read(cond) if cond else None
            if x is not None and means[s.setting]:
                pairs.append((x, (s.value - means[s.setting]) / means[s.setting] * 100.0))
        xs = np.array([p[0] for p in pairs])
        if len(pairs) < 3 or np.ptp(xs) == 0:
            continue
        res = stats.spearmanr(xs, [p[1] for p in pairs])
        rho, p = float(res.statistic), float(res.pvalue)
        if math.isfinite(rho):
            out.append({"condition": name, "starts": len(pairs), "rho": rho, "p_value": p})
    return out


# -- text and files -----------------------------------------------------------------------------------


def _pct(v: float | None, fmt: str = "{:.2f}%") -> str:
    return "-" if v is None else fmt.format(v)


def _cell(row: ShrinkRow | None) -> str:
    if row is None:
        return ""
    v = row.spread_pct
    return ("-" if v is None else f"{v:.2f}" if v < 1000 else f"{v:.3g}") + ("*" if row.design else "")


def format_noise(r: NoiseReport) -> str:
    agg = "the median of steps" if r.aggregate == "median" else "the mean"
    lines = [f"noise study of run {r.run_id} ({r.name}: {r.measure}, {agg}; profile {r.profile})"]
    settings = "; ".join(f"{k} ({len(v)} arm{'s' * (len(v) > 1)})" for k, v in r.settings.items())
    d = r.decomposition
    if d is None:
        lines.append(f"  no decomposition: {r.decomposition_note}")
    else:
        steps = f", {d.steps_per_request:.1f} steps a request" if d.steps_per_request else ""
        lines.append(
            f"  {d.starts} starts of {d.settings} setting{'s' * (d.settings > 1)} ({settings}), {d.requests} measured "
            f"requests a start ({r.design_warmup} warm-up dropped){steps}"
        )
        step_shares, cell_shares = d.shares_of_step(), d.shares_of_cell()
        lines.append(
            f"  {'level':<24} {'sd':>8}  {'share of a step':>15}  {f'share of a cell ({d.requests} req.)':>24}"
        )
        for name in LEVELS:
            lv = d.level(name)
            share_step, share_cell = step_shares[name], cell_shares[name]
            lines.append(
                f"  {WORDS[name]:<24} {_pct(d.sd_pct(name)):>8}  "
                f"{_pct(None if share_step is None else 100 * share_step, '{:.1f}%'):>15}  "
                f"{_pct(None if share_cell is None else 100 * share_cell, '{:.1f}%'):>24}"
                + (f"  ({lv.note})" if lv.note else "")
                + (f"  [raw {lv.raw:.3g} < 0: clipped]" if lv.raw is not None and lv.raw < 0 else "")
            )
        work = d.to_json()["workload_sd_pct"]
        if work is not None:
            lines.append(
                f"  (the workload: the requests' own differences, the same in every start, sd {work:.2f}%: not noise)"
            )
        ci = d.observed_sd_ci_pct()
        model = d.spread_pct()
        lines.append(
            f"  the start values' sd {_pct(d.observed_sd_pct())}"
            + (f" (95% interval {ci[0]:.2f}-{ci[1]:.2f}%, {d.ms_start_df} df)" if ci else "")
            + f"; the three levels' A/A spread {_pct(model)} (a start's sd {_pct(d.to_json()['cell_sd_pct'])})"
        )
    row = r.design_row()
    unit, most = (
        ("blocks", planning.MAX_BLOCKS) if r.kind == "blocks" else ("starts per arm", planning.MAX_STARTS_PER_ARM)
    )
    if row is not None:
        lines.append(
            f"  the design as run: spread {_pct(row.spread_pct)} ({row.spread_from}, {row.effects}); "
            + (
                f"`plan` asks {row.blocks_for_80} {unit} for {r.effect_pct:g}% at 80% power"
                if row.blocks_for_80 is not None
                else f"`plan` finds no count of {unit} up to {most} for {r.effect_pct:g}% at 80% power"
            )
        )
    for aggregate in dict.fromkeys(x.aggregate for x in r.shrink):
        rows = [x for x in r.shrink if x.aggregate == aggregate]
        top = max(x.requests for x in rows)
        word = "median of steps" if aggregate == "median" else "mean"
        lines.append(f"  spread, % ({rows[0].spread_from}), {word}: requests a draw (n) by first requests dropped")
        lines.append("          " + "".join(f"{f'n={n}':>9}" for n in range(1, top + 1)))
        for dropped in sorted({x.dropped for x in rows}):
            cells = {x.requests: x for x in rows if x.dropped == dropped}
            lines.append(f"  drop {dropped:<3}" + "".join(f"{_cell(cells.get(n)):>9}" for n in range(1, top + 1)))
    if r.shrink:
        lines.append("  (* the design as registered)")
    lines.append("  the rig per start:")
    for s in r.starts:
        c = s["conditions"] or {}
        gpu = (
            f"SM {c['gpu_sm_clock_mhz']:.0f} MHz, {c['gpu_temperature_c']:.0f} C, {c['gpu_power_w']:.0f} W"
            if c.get("gpu_sm_clock_mhz") is not None
            and c.get("gpu_temperature_c") is not None
            and c.get("gpu_power_w") is not None
            else "no GPU"
        )
        lines.append(
            f"    start {s['start']:>2} {s['arm']:<10} {s['value']:.6g}  {gpu}"
            + (f", throttle {','.join(s['throttle'])}" if s["throttle"] else "")
            + (f", link {'; '.join(s['link'])}" if s["link"] else "")
            + f"; CPU {_pct(c.get('cpu_mhz'), '{:.0f} MHz')}, steal {_pct(c.get('steal_percent'), '{:.1f}%')}, "
            f"others {_pct(c.get('others_percent'), '{:.0f}%')} of a core"
        )
    for e in r.explained:
        lines.append(f"  {e['condition']}: Spearman rho {e['rho']:+.2f} (p {e['p_value']:.3g}, {e['starts']} starts)")
    lines += [f"  note: {n}" for n in r.notes]
    return "\n".join(lines)


def write_files(run: Run, report: NoiseReport | None = None) -> dict[str, str]:
    """noise.json, noise.txt and noise.html in the run folder (0600); returns their paths by kind."""
    from frank.experiments.html import noise_page
    from frank.reports.page import write_page

    report = report or noise_report(run)
    out = {"json": run.folder / "noise.json", "text": run.folder / "noise.txt", "html": run.folder / "noise.html"}
    paths.write_private(out["json"], json.dumps(report.to_json(), indent=1, sort_keys=True) + "\n")
    paths.write_private(out["text"], format_noise(report) + "\n")
    write_page(out["html"], noise_page(report.to_json()))
    return {k: str(v) for k, v in out.items()}


def finish_study(run: Run) -> str:
    """What a noise study's job does when its last cell is done: its report files, or why there are none."""
    try:
        files = write_files(run)
    except FrankError as exc:
        return f"noise study: no report: {exc}"
    return f"noise study: {files['text']}, {files['json']}, {files['html']}"
