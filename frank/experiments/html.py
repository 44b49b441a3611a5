"""An experiment report as one self-contained HTML page: the design and its hash, the drawn order, the
per-block (or per-start) values per arm and the effects as plots, the table behind them, the guards, the
revert rule, and the decision with the rule that made it, read from the report's fields.
"""

from __future__ import annotations

from typing import Any

from frank.experiments import exact
from frank.experiments.analysis import ExperimentReport
from frank.experiments.fidelity import FidelityResult
from frank.reports import plots
from frank.reports.page import Page


def _rule_text(r: ExperimentReport) -> str:
    if r.test == "sign":
        word = r.direction or "lower"
        need = "in every block" if r.require_all else "by the sign test"
        alpha = f", p <= {r.alpha:g}" if r.alpha is not None else ""
        return f"{r.treatment} {word} than {r.control} {need}{alpha} (one-sided exact sign test)"
    if r.test == "permutation":
        return (
            f"{r.treatment} {r.direction} than {r.control}: one-sided exact permutation test "
            f"over every balanced relabelling, p <= {r.alpha}"
        )
    rules = [c.text for c in r.criteria or ()]
    if r.fidelity:
        rules.append(f"mean KL per set: {r.treatment} no higher than {r.control} + floor")
    return "all hold: " + "; ".join(rules)


def experiment_page(r: ExperimentReport) -> str:
    arms = (r.treatment, r.control)
    decision = r.decision
    title = f"{r.name}: {decision.verdict}"
    page = Page(title, r.question)
    page.decision(decision.verdict, decision.reason, _rule_text(r))
    page.heading("Design")
    facts: list[tuple[str, Any]] = [
        ("design sha256", r.design_sha256),
        ("kind", r.kind),
        ("test", r.test),
        ("measure", r.measure or "-"),
        ("treatment", r.treatment),
        ("control", r.control),
    ]
    run = r.run
    for arm in run.arms if run else ():
        facts.append((f"arm {arm['name']}", f"profile {arm['profile']} ({arm.get('kind') or 'unknown'} engine)"))
    if run is not None:
        facts += [
            ("run", run.run_id),
            ("registered", run.registered_at),
            ("seed", run.seed),
            ("order", f"#{run.order_index} (0-based) of {run.order_count}, drawn uniformly at registration"),
        ]
    elif r.results_csv:
        facts.append(("results", r.results_csv))
    if r.null_size and r.smallest_p is not None:
        facts.append(("null size / smallest p", f"{r.null_size} / {exact.fraction(r.smallest_p, r.null_size)}"))
    page.facts(facts, element_id="design")
    page.heading("Run order" + (" (drawn at registration)" if run else ""))
    if r.order:
        page.table(
            ["start", "block", "arm"],
            [[o.get("start"), o.get("block") or "-", o["arm"]] for o in r.order],
            element_id="order",
        )
    else:
        page.paragraph("the run order of these measures was not recorded with them", "note")
    page.heading("Results")
    if r.blocks is not None:
        rows = r.block_rows()
        page.figure(
            plots.values_by_block(rows, arms, r.measure or ""),
            f"{r.measure} per block for {arms[0]} and {arms[1]}",
            element_id="plot-values",
        )
        page.figure(
            plots.effects_by_block(rows, *arms, r.direction),
            "effect per block: (treatment - control) / control, in percent",
            element_id="plot-effects",
        )
        page.table(
            ["block", arms[0], arms[1], "effect %", "sign"],
            [
                [
                    b.block,
                    b.values.get(arms[0]),
                    b.values.get(arms[1]),
                    None if b.effect_pct is None else f"{b.effect_pct:+.2f}",
                    "void" if b.voided else b.sign,
                ]
                for b in r.blocks.blocks
            ],
            element_id="values",
        )
        if decision.mean_effect_pct is not None:
            t = r.blocks
            page.paragraph(
                f"mean effect {decision.mean_effect_pct:+.2f}%: {t.wins} wins, {t.losses} losses, {t.ties} ties"
            )
    elif r.comparison is not None:  # live criteria starts: the rules below
        starts = r.starts or ()
        page.figure(
            plots.starts_by_arm([s.to_json() for s in starts], arms, r.measure or ""),
            f"{r.measure} per engine start in run order",
            element_id="plot-values",
        )
        page.table(["start", "arm", "value"], [[s.start, s.arm, s.value] for s in starts], element_id="values")
        if r.comparison.mean_difference is not None:
            page.paragraph(
                f"mean difference {r.comparison.mean_difference:+.6g} ({decision.mean_effect_pct or 0:+.2f}%)"
            )
    else:
        criteria = r.criteria or ()
        page.figure(
            plots.criteria_bars([c.to_json() for c in criteria], arms),
            "each criterion per arm",
            element_id="plot-values",
        )
        rules = [[c.text, c.treatment, c.control, {True: "yes", False: "NO", None: "no data"}[c.met]] for c in criteria]
        if r.fidelity:  # the fidelity rule is one of the rules: its row says whether it was evaluated
            met = {"pass": "yes", "fail": "NO"}.get(r.fidelity["status"], "could not be evaluated")
            rules.append([f"KL per set: {arms[0]} <= {arms[1]} + floor", "see below", "see below", met])
        page.table(["rule", arms[0], arms[1], "met"], rules, element_id="values")
    draws = run.draws if run else []
    if draws:
        page.heading("Per draw")
        page.figure(plots.draws_by_arm(draws, arms), "client seconds per draw and arm", element_id="plot-draws")
        page.table(
            ["start", "arm", "draw", "total s (client)", "passed", "episodes", "errors", "fresh cache by"],
            [
                [
                    d["start"],
                    d["arm"],
                    d["draw"],
                    d["total_s"],
                    d["passed"],
                    d["episodes"],
                    d["errors"],
                    d.get("cache_namespace") or "-",
                ]
                for d in draws
            ],
            element_id="draws",
        )
    if r.fidelity:
        _fidelity_section(page, r.fidelity, arms)
    if decision.p_value is not None:
        null = r.tested.null_size if r.tested else None
        page.paragraph(f"p = {decision.p_fraction} ({decision.p_value:.6g}), null size {null or r.null_size}")
    page.heading("Guards and revert rule")
    page.table(
        ["guard", "status", "detail"],
        [[g.name, g.status, g.detail] for g in decision.guards],
        element_id="guards",
    )
    if decision.revert is not None:
        rv = decision.revert
        why = [*rv.triggers, *rv.unchecked]
        page.paragraph(
            f"revert rule: {rv.outcome}"
            + (f" ({'; '.join(why)})" if why else "")
            + (f". {rv.description}" if rv.description else "")
        )
    for note in r.notes:
        page.paragraph(f"note: {note}", "note")
    return page.render()


def _fidelity_section(page: Page, fid: FidelityResult, arms: tuple[str, str]) -> None:
    """Per set: each arm's mean KL, the difference, the floor and its parts, and the rule's outcome; a start
    that gave no KL is named with the reason (never shown as a zero)."""
    page.heading("Fidelity")
    page.paragraph(f"rule per set: mean KL({arms[0]}) <= mean KL({arms[1]}) + floor (floor: {fid['floor_rule']})")
    if fid.get("reference") == "control":
        from frank.experiments.fidelity_control import control_reference

        page.paragraph(f"reference: {control_reference(fid)}; KL measures the effect relative to the control")
    if any(row["treatment"] is not None or row["control"] is not None for row in fid["sets"]):
        page.figure(plots.kl_by_set(fid["sets"], arms), "mean KL per set and arm", element_id="plot-kl")
    page.table(
        ["set", f"KL {arms[0]}", f"KL {arms[1]}", "difference", "floor", "floor from", "met"],
        [
            [
                row["name"],
                _kl(row["treatment"]),
                _kl(row["control"]),
                _kl(row["difference"]),
                _kl(row["floor"]),
                ", ".join(f"{k} {_kl(v) if isinstance(v, float) else v}" for k, v in row["floor_parts"].items()) or "-",
                {True: "yes", False: "NO"}.get(row["met"], "no KL"),
            ]
            for row in fid["sets"]
        ],
        element_id="fidelity",
    )
    for m in fid.get("mismatched", []):
        page.paragraph(f"tokens differ: {m['detail']}", "note")
    for u in fid.get("unavailable", []):
        page.paragraph(f"no KL from start {u['start']} ({u['arm']}): {u['reason']}", "note")
    for note in fid.get("notes", []):
        page.paragraph(f"note: {note}", "note")


def _kl(value: Any) -> str:
    return "-" if value is None else f"{value:.3e}"


def screen_page(rec: dict[str, Any]) -> str:
    """A screen's record as a page: the pick, every setting's values (plot and table), the confirmation."""
    from frank.reports import plots

    r = rec["result"]
    page = Page(f"{rec['name']}: screen, pick {r['pick'] or 'none'}", rec.get("question", ""))
    page.decision(r["pick"] or "no pick", r["pick_reason"], "a screen picks; only the registered confirmation decides")
    page.facts(
        [
            ("screen sha256", rec["screen_sha256"]),
            ("run", rec.get("run_id") or "-"),
            ("profile", rec["profile"]),
            ("measure", f"{r['measure']} ({r['direction']} is better)"),
            ("repeats", r["repeats"]),
            ("order", f"seed {rec['order'].get('seed')}, #{rec['order'].get('index')} of {rec['order'].get('count')}"),
            ("spread between repeats", f"{r['spread_pct']:.3g}%" if r["spread_pct"] is not None else "-"),
        ]
    )
    page.figure(plots.values_by_setting(r["settings"], r["measure"], r["pick"]), "values per setting", "values")
    page.table(
        ["setting", "knobs", "median", "wins against the control", "values"],
        [
            [
                s["name"] + (" (control)" if s["is_control"] else ""),
                ", ".join(f"{k}={v}" for k, v in s["knobs"].items()),
                s["median"],
                "" if s["is_control"] else f"{s['wins']} of {s['compared']}",
                " ".join("–" if v is None else f"{v:.4g}" for v in s["values"]),
            ]
            for s in r["settings"]
        ],
        element_id="settings",
    )
    conf = rec.get("confirmation")
    if conf:
        page.heading("The confirmation design")
        page.paragraph(f"{conf['name']}: {conf['blocks']} blocks, sha256 {conf['design_sha256']}")
        page.paragraph(conf["design_toml"], css="pre")
    return page.render()


def noise_page(rep: dict[str, Any]) -> str:
    """A noise study's report (frank.experiments.noise_report, as JSON) as a page: each level's share, the
    spread by requests a cell and first requests dropped (plot and table), the rig beside each start."""
    d = rep.get("decomposition")
    page = Page(f"{rep['name']}: where the noise comes from", f"run {rep['run_id']}, {rep['measure']}")
    page.facts(
        [
            ("run", rep["run_id"]),
            ("profile", rep["profile"]),
            ("measure", f"{rep['measure']} ({rep['aggregate']})"),
            ("settings", "; ".join(f"{k}: {', '.join(v)}" for k, v in rep["settings"].items())),
            ("warm-up dropped, requests measured", f"{rep['design_warmup']}, {rep['design_requests'] or 'every one'}"),
            ("effect planned for", f"{rep['effect_pct']:g}%"),
        ],
        element_id="design",
    )
    page.heading("The three levels")
    if d is None:
        page.paragraph(f"no decomposition: {rep['decomposition_note']}", "note")
    else:
        words = {
            "step": "step within a request",
            "request": "request within a start",
            "start": "start within a setting",
        }

        def pct(v: Any) -> str:
            return "-" if v is None else f"{100 * v:.1f}%"

        page.table(
            [
                "level",
                "sd, % of the mean",
                "share of a step",
                f"share of a cell ({d['requests']} requests)",
                "df",
                "note",
            ],
            [
                [
                    words[name],
                    "-" if lv["sd_pct"] is None else f"{lv['sd_pct']:.2f}",
                    pct(lv["share_of_step"]),
                    pct(lv["share_of_cell"]),
                    lv["df"],
                    lv["note"] or "",
                ]
                for name, lv in d["levels"].items()
            ],
            element_id="levels",
        )
        ci = d.get("observed_cell_sd_ci95_pct")
        page.paragraph(
            f"{d['starts']} starts, {d['requests']} requests a start"
            + (f", {d['steps_per_request']:.1f} steps a request" if d.get("steps_per_request") else "")
            + (
                f"; the workload's own spread (not noise) {d['workload_sd_pct']:.2f}%"
                if d.get("workload_sd_pct") is not None
                else ""
            )
            + (f"; start values' sd 95% interval {ci[0]:.2f}-{ci[1]:.2f}%" if ci else "")
        )
    page.heading("Spread by requests a cell")
    if rep["shrink"]:
        page.figure(
            plots.spread_by_requests(rep["shrink"], rep.get("model") or []),
            "the spread `frank experiment plan` takes, by requests measured a draw; one line per number of first "
            "requests dropped (dashed: the median of steps), dotted: the three-level model",
            element_id="plot-spread",
        )
        page.table(
            [
                "aggregate",
                "dropped",
                "requests",
                "starts",
                "spread %",
                "from",
                "start sd %",
                f"blocks for {rep['effect_pct']:g}% (80%)",
            ],
            [
                [
                    r["aggregate"] + (" (design)" if r["design"] else ""),
                    r["dropped"],
                    r["requests"],
                    r["starts"],
                    None if r["spread_pct"] is None else f"{r['spread_pct']:.2f}",
                    f"{r['spread_from']} ({r['effects']})",
                    None if r["start_sd_pct"] is None else f"{r['start_sd_pct']:.2f}",
                    r["blocks_for_80"] if r["blocks_for_80"] is not None else "-",
                ]
                for r in rep["shrink"]
            ],
            element_id="shrink",
        )
    page.heading("The rig beside each start")
    names = [
        n
        for n in ("gpu_sm_clock_mhz", "gpu_temperature_c", "gpu_power_w", "cpu_mhz", "steal_percent", "others_percent")
    ]
    page.table(
        ["start", "arm", "value", *names, "throttle", "link"],
        [
            [
                s["start"],
                s["arm"],
                s["value"],
                *[
                    None if not s["conditions"] or s["conditions"].get(n) is None else round(s["conditions"][n], 2)
                    for n in names
                ],
                ", ".join(s["throttle"]) or "-",
                "; ".join(s["link"]) or "-",
            ]
            for s in rep["starts"]
        ],
        element_id="rig",
    )
    for e in rep.get("explained") or ():
        page.paragraph(f"{e['condition']}: Spearman rho {e['rho']:+.2f} (p {e['p_value']:.3g}, {e['starts']} starts)")
    for note in rep.get("notes") or ():
        page.paragraph(f"note: {note}", "note")
    return page.render()
