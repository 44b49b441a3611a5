"""An experiment report as one self-contained HTML page: the design and its hash, the drawn order, the
per-block (or per-start) values per arm and the effects as plots, the table behind them, the guards, the
revert rule, and the decision with the rule that made it. Built from the same dict as `report --json`.
"""

from __future__ import annotations

from typing import Any

from frank.experiments import exact
from frank.experiments.decision import Decision
from frank.reports import plots
from frank.reports.page import Page


def _rule_text(r: dict[str, Any]) -> str:
    if r["test"] == "sign":
        word = r.get("direction") or "lower"
        need = "in every block" if r.get("require_all") else "by the sign test"
        alpha = f", p <= {r['alpha']:g}" if r.get("alpha") is not None else ""
        return f"{r['treatment']} {word} than {r['control']} {need}{alpha} (one-sided exact sign test)"
    if r["test"] == "permutation":
        return (
            f"{r['treatment']} {r.get('direction')} than {r['control']}: one-sided exact permutation test "
            f"over every balanced relabelling, p <= {r.get('alpha')}"
        )
    rules = [c["text"] for c in r.get("criteria", [])]
    if r.get("fidelity"):
        rules.append(f"mean KL per set: {r['treatment']} no higher than {r['control']} + floor")
    return "all hold: " + "; ".join(rules)


def experiment_page(r: dict[str, Any]) -> str:
    arms = (r["treatment"], r["control"])
    decision = Decision.of(r)
    title = f"{r['name']}: {decision.verdict}"
    page = Page(title, r.get("question", ""))
    page.decision(decision.verdict, decision.reason, _rule_text(r))
    page.heading("Design")
    facts: list[tuple[str, Any]] = [
        ("design sha256", r["design_sha256"]),
        ("kind", r["kind"]),
        ("test", r["test"]),
        ("measure", r.get("measure") or "-"),
        ("treatment", r["treatment"]),
        ("control", r["control"]),
    ]
    for arm in r.get("arms", []):
        facts.append((f"arm {arm['name']}", f"profile {arm['profile']} ({arm.get('kind') or 'unknown'} engine)"))
    if r.get("run_id"):
        facts += [
            ("run", r["run_id"]),
            ("registered", r.get("registered_at")),
            ("seed", r.get("seed")),
            ("order", f"#{r.get('order_index')} (0-based) of {r.get('order_count')}, drawn uniformly at registration"),
        ]
    elif r.get("results_csv"):
        facts.append(("results", r["results_csv"]))
    if r.get("null_size"):
        facts.append(
            ("null size / smallest p", f"{r['null_size']} / {exact.fraction(r['smallest_p'], r['null_size'])}")
        )
    page.facts(facts, element_id="design")
    page.heading("Run order" + (" (drawn at registration)" if r.get("run_id") else ""))
    if r.get("order"):
        page.table(
            ["start", "block", "arm"],
            [[o.get("start"), o.get("block") or "-", o["arm"]] for o in r["order"]],
            element_id="order",
        )
    else:
        page.paragraph("the run order of these measures was not recorded with them", "note")
    page.heading("Results")
    if r["kind"] == "blocks":
        page.figure(
            plots.values_by_block(r["blocks"], arms, r.get("measure") or ""),
            f"{r.get('measure')} per block for {arms[0]} and {arms[1]}",
            element_id="plot-values",
        )
        page.figure(
            plots.effects_by_block(r["blocks"], *arms, r.get("direction")),
            "effect per block: (treatment - control) / control, in percent",
            element_id="plot-effects",
        )
        page.table(
            ["block", arms[0], arms[1], "effect %", "sign"],
            [
                [
                    b["block"],
                    b["values"].get(arms[0]),
                    b["values"].get(arms[1]),
                    None if b["effect_pct"] is None else f"{b['effect_pct']:+.2f}",
                    "void" if b["voided"] else b["sign"],
                ]
                for b in r["blocks"]
            ],
            element_id="values",
        )
        if r.get("mean_effect_pct") is not None:
            page.paragraph(
                f"mean effect {r['mean_effect_pct']:+.2f}%: {r['wins']} wins, {r['losses']} losses, {r['ties']} ties"
            )
    elif r["kind"] == "balanced" and r["test"] != "criteria":  # live criteria starts: the rules below
        page.figure(
            plots.starts_by_arm(r.get("starts", []), arms, r.get("measure") or ""),
            f"{r.get('measure')} per engine start in run order",
            element_id="plot-values",
        )
        page.table(
            ["start", "arm", "value"],
            [[s["start"], s["arm"], s["value"]] for s in r.get("starts", [])],
            element_id="values",
        )
        if r.get("mean_difference") is not None:
            page.paragraph(f"mean difference {r['mean_difference']:+.6g} ({r['mean_effect_pct']:+.2f}%)")
    else:
        page.figure(
            plots.criteria_bars(r.get("criteria", []), arms), "each criterion per arm", element_id="plot-values"
        )
        rules = [
            [c["text"], c["treatment"], c["control"], {True: "yes", False: "NO"}.get(c["met"], "no data")]
            for c in r.get("criteria", [])
        ]
        if r.get("fidelity"):  # the fidelity rule is one of the rules: its row says whether it was evaluated
            fid = r["fidelity"]
            met = {"pass": "yes", "fail": "NO"}.get(fid["status"], "could not be evaluated")
            rules.append([f"KL per set: {arms[0]} <= {arms[1]} + floor", "see below", "see below", met])
        page.table(["rule", arms[0], arms[1], "met"], rules, element_id="values")
    if r.get("draws"):
        page.heading("Per draw")
        page.figure(plots.draws_by_arm(r["draws"], arms), "client seconds per draw and arm", element_id="plot-draws")
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
                for d in r["draws"]
            ],
            element_id="draws",
        )
    if r.get("fidelity"):
        _fidelity_section(page, r["fidelity"], arms)
    if r.get("p_value") is not None:
        page.paragraph(
            f"p = {r['p_fraction']} ({r['p_value']:.6g}), null size {r.get('tested_null_size') or r['null_size']}"
        )
    page.heading("Guards and revert rule")
    page.table(
        ["guard", "status", "detail"],
        [[g["name"], g["status"], g["detail"]] for g in r.get("guards", [])],
        element_id="guards",
    )
    if r.get("revert"):
        rv = r["revert"]
        page.paragraph(
            f"revert rule: {rv['outcome']}"
            + (f" ({'; '.join(rv['triggers'] + rv['unchecked'])})" if rv["triggers"] or rv["unchecked"] else "")
            + (f". {rv['description']}" if rv.get("description") else "")
        )
    for note in r.get("notes", []):
        page.paragraph(f"note: {note}", "note")
    return page.render()


def _fidelity_section(page: Page, fid: dict[str, Any], arms: tuple[str, str]) -> None:
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
