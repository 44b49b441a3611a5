"""An experiment report as text (`frank experiment report|analyze` without --json): the design and its
rule, the per-block (or per-start) table, the p-value, fidelity, guards, revert rule and the decision."""

from __future__ import annotations

from typing import Any

from frank.experiments import exact
from frank.experiments.analysis import ExperimentReport
from frank.experiments.fidelity import FidelityResult


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)


def format_fidelity(fid: FidelityResult, treatment: str, control: str) -> list[str]:
    """Per-set KL per arm beside the floor: `treatment <= control + floor` or not."""

    def kl(v: Any) -> str:
        return "-" if v is None else f"{v:.3e}"

    lines = [
        f"  fidelity (KL, top-64; rule: {treatment} <= {control} + floor, floor {fid['floor_rule']})",
        f"  {'set':<10} {treatment:>12} {control:>12} {'difference':>12} {'floor':>12}  rule",
    ]
    for row in fid["sets"]:
        mark = {True: "met", False: "NOT met", None: "no data"}[row["met"]]
        lines.append(
            f"  {row['name']:<10} {kl(row['treatment']):>12} {kl(row['control']):>12} "
            f"{kl(row['difference']):>12} {kl(row['floor']):>12}  {mark}"
        )
    if fid.get("reference") == "control":
        from frank.experiments.fidelity_control import control_reference

        lines.append(f"  reference: {control_reference(fid)}")
    lines += [f"  tokens differ: {m['detail']}" for m in fid.get("mismatched", [])]
    lines += [f"  no KL: start {u['start']} ({u['arm']}): {u['reason']}" for u in fid.get("unavailable", [])]
    return lines + [f"  note: {n}" for n in fid.get("notes", [])]


def format_report(r: ExperimentReport) -> str:
    d = r.decision
    lines = [
        f"{r.name}  ({r.kind}, {r.test} test, measure {r.measure or '-'})",
        f"  question: {r.question}",
        f"  design sha256: {r.design_sha256}",
    ]
    if r.run is not None:
        lines.append(
            f"  run: {r.run.run_id}  seed {r.run.seed}  order #{r.run.order_index} (0-based) of {r.run.order_count}"
        )
    if r.order:
        lines.append(
            "  order: " + " ".join(f"{o['arm']}" + (f"(b{o['block']})" if o.get("block") else "") for o in r.order)
        )
    if r.blocks is not None:
        lines.append(f"  {'block':>5}  {r.treatment:>14}  {r.control:>14}  {'effect':>8}  sign")
        hosts = r.hosts or {}
        for b in r.blocks.blocks:
            eff = "-" if b.effect_pct is None else f"{b.effect_pct:+.2f}%"
            lines.append(
                f"  {b.block:>5}  {_num(b.values.get(r.treatment)):>14}  "
                f"{_num(b.values.get(r.control)):>14}  {eff:>8}  "
                f"{'void' if b.voided else (b.sign or '')}" + (f"  on {hosts[b.block]}" if hosts.get(b.block) else "")
            )
        if d.mean_effect_pct is not None:
            t = r.blocks
            lines.append(f"  mean effect {d.mean_effect_pct:+.2f}%  ({t.wins} wins, {t.losses} losses, {t.ties} ties)")
    elif r.comparison is not None:
        for s in r.starts or ():
            lines.append(f"  start {s.start:>2}  {s.arm:<14} {_num(s.value)}")
        c = r.comparison
        if c.mean_difference is not None:
            ratio = c.ratio_of_means
            lines.append(
                f"  mean difference {c.mean_difference:+.6g} ({d.mean_effect_pct or 0:+.2f}%)"
                + (f", ratio of the means {r.control}/{r.treatment} {ratio:.3g}x" if ratio else "")
            )
    else:
        for s in r.starts or ():
            if s.start:  # live criteria starts: each measure of each start
                lines.append(f"  start {s.start:>2}  {s.arm:<14} {s.measure or '':<20} {_num(s.value)}")
        for crit in r.criteria or ():
            mark = {True: "met", False: "NOT met", None: "no data"}[crit.met]
            lines.append(f"  {crit.text}: {_num(crit.treatment)} vs {_num(crit.control)}  {mark}")
    for draw in r.run.draws if r.run else ():
        lines.append(
            f"  start {draw['start']:>2}  {draw['arm']:<14} draw {draw['draw']}: {draw['total_s']:.1f} s, "
            f"{draw['passed']} of {draw['episodes']} passed, {draw['errors']} errors "
            f"({draw.get('cache_namespace') or '-'})"
        )
    if d.p_value is not None:
        null = r.tested.null_size if r.tested else r.null_size
        smallest = exact.fraction(r.smallest_p, r.null_size) if r.smallest_p is not None else "-"
        lines.append(
            f"  p = {d.p_fraction} ({d.p_value:.6g}), null size {null or r.null_size}, smallest reachable {smallest}"
        )
    if r.fidelity:
        lines += format_fidelity(r.fidelity, r.treatment, r.control)
    for g in d.guards:
        lines.append(f"  guard {g.name}: {g.status} ({g.detail})")
    if d.revert is not None:
        rv = d.revert
        why = [*rv.triggers, *rv.unchecked]
        lines.append(f"  revert rule: {rv.outcome}" + (f" ({'; '.join(why)})" if why else ""))
    stop = r.stopped_when_decided
    if stop is not None:
        saved = r.cost_not_spent.seconds_not_spent if r.cost_not_spent else None
        lines.append(
            f"  stopped when decided after {stop.unit} {stop.after} of {stop.of}: {stop.left} not run"
            + (f" (about {saved:.0f} s of engine starts not spent)" if saved else "")
        )
    for note in r.notes:
        lines.append(f"  note: {note}")
    lines.append(f"  decision: {d.verdict.upper()}: {d.reason}")
    return "\n".join(lines)
