"""`frank campaign init|status|adopt|serve|revert|history|watch`: the campaign ledger from the shell.

Every command takes `--file PATH` (default: campaign.toml in the config dir) and `--json` (one object).
State changes check their evidence and append to the history; see docs/campaign.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from frank.console.cli.common import emit, emit_record

if TYPE_CHECKING:
    from frank.campaign.evidence import EvidenceEntry
    from frank.campaign.results import CampaignStatus, TakesEffect


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    camp = sub.add_parser("campaign", help="the campaign ledger: parts, their evidence, revert rules, the watch")
    csub = camp.add_subparsers(dest="campaign_command", metavar="ACTION", required=True)

    def add(name: str, help_text: str, func: Any) -> argparse.ArgumentParser:
        p = csub.add_parser(name, help=help_text)
        p.add_argument("--file", default=None, help="campaign file (default: campaign.toml in the config dir)")
        p.add_argument("--json", action="store_true")
        p.set_defaults(func=func)
        return p

    init = add("init", "a new campaign (or a copy of a shipped example), or record an existing file", cmd_init)
    init.add_argument("--example", default=None, help="copy a shipped example (seed, smollm2, moe, exl3)")
    add("status", "every part: state, evidence, revert rules and their last check, what is next", cmd_status)
    adopt = add("adopt", "adopt a part: needs a confirmed registered run of its design", cmd_adopt)
    adopt.add_argument("part")
    adopt.add_argument("--run", default=None, help="the registered run to adopt on (default: the newest confirmed)")
    serve = add("serve", "serve a part: its knob values become the profile's defaults", cmd_serve)
    serve.add_argument("part")
    serve.add_argument("--policy", default=None, help="serve a passed (not adopted) part on a policy call: why")
    revert = add("revert", "revert a part: needs a fired revert rule or --reason", cmd_revert)
    revert.add_argument("part")
    revert.add_argument("--reason", default=None, help="revert without a fired rule: why (recorded)")
    add("history", "every recorded event", cmd_history)
    add("watch", "check finished runs against the served parts' revert rules now", cmd_watch)


def cmd_init(args: argparse.Namespace) -> int:
    from frank.campaign import actions

    out = actions.init(args.file, args.example)
    emit_record(
        args.json,
        out,
        lambda p: (
            f"{'created' if p.created else 'recorded'} {p.file} "
            f"({len(p.parts)} parts: {', '.join(p.parts) or 'none'}); history {p.history}"
        ),
    )
    return 0


def _history_step(e: EvidenceEntry) -> str:
    """A serve or revert from the history, in words (they carry no decision of their own)."""
    if e.get("policy"):
        return f"policy: {e['policy']}"
    rule = e.get("rule")
    if rule:
        return f"rule {', '.join(rule.get('rules') or [])} fired on {rule.get('run_kind')} {rule.get('run_id')}"
    if e.get("reason"):
        return f"reason: {e['reason']}"
    return "after adoption" if e.get("state") == "served" else "-"


def _human_status(s: CampaignStatus) -> str:
    from frank.campaign.evidence import blocks_text

    lines = [f"campaign {s.name}  ({s.file})", *s.alerts]
    for p in s.parts:
        knobs = " ".join(f"{k}={v}" for k, v in p.knobs.items()) or "no knobs"
        lines.append(f"\n{p.name:<16} {p.state.upper():<10} {p.profile}: {knobs}   {p.title}")
        for e in p.evidence:
            what = (
                e.get("policy")
                if e.get("source") == "policy"
                else _history_step(e)
                if e.get("source") == "history" and not e.get("decision")
                else f"{e.get('decision')}"
                + (f", p = {e['p_fraction']}" if e.get("p_fraction") else "")
                + (f", design {(e.get('design_sha256') or '')[:12]}" if e.get("design_sha256") else "")
                + (f", run {e['run_id']}" if e.get("run_id") else "")
                + (f", exported from run {e['results_run_id']}" if e.get("results_run_id") else "")
            )
            mark = "" if e.get("ok") else f"  [PROBLEM: {e.get('problem')}]"
            source = f"{e.get('source')}{' (awaited, here now)' if e.get('awaited') else ''}"
            lines.append(f"  {e['state']:<9} {e.get('date') or '':<10} {source}: {what}{mark}")
            if e.get("state") == "rejected" or e.get("awaited"):  # the blocks that decided it
                blocks = blocks_text(e)
                if blocks:
                    lines.append(f"  {'':<9} {'':<10} {blocks}")
        for a in p.awaiting:
            lines.append(f"  awaits    {a.describe()}")
        if p.awaits_evidence and not p.evidence:
            lines.append("  no evidence yet: not decided")
        if p.served_defaults and not p.served_defaults.ok:
            lines.append(f"  PROBLEM: served, but {p.served_defaults.detail}")
        for r in p.revert_rules:
            last = r.last_check
            seen = f"{last.outcome} on {last.run_kind} {last.run_id}: {last.detail}" if last else "not checked yet"
            lines.append(f"  rule {r.name} ({r.kind}): {seen}")
        up_next = "awaits its evidence (above), not decided" if p.awaits_evidence and not p.evidence else p.up_next
        lines.append(f"  next: {up_next}" + (f"; {p.next}" if p.next else ""))
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    from frank.campaign import actions

    emit_record(args.json, actions.status(args.file), _human_status)
    return 0


def cmd_adopt(args: argparse.Namespace) -> int:
    from frank.campaign import actions

    out = actions.adopt(args.part, args.file, args.run)
    emit_record(
        args.json,
        out,
        lambda p: (
            f"adopted {p.part} on run {p.run_id} ({p.decision}, p = {p.p_fraction}, design {p.design_sha256[:12]})"
        ),
    )
    return 0


def _effect_text(effect: TakesEffect) -> str:
    return "\n".join([f"  takes effect on: {effect.starts}"] + [f"  note: {n}" for n in effect.notes])


def cmd_serve(args: argparse.Namespace) -> int:
    from frank.campaign import actions

    out = actions.serve(args.part, args.file, args.policy)
    emit_record(
        args.json,
        out,
        lambda p: (
            f"served {p.part}: {p.profile} defaults {p.knobs} (were {p.previous_defaults}) in {p.override}\n"
            + _effect_text(p.takes_effect)
        ),
    )
    return 0


def cmd_revert(args: argparse.Namespace) -> int:
    from frank.campaign import actions

    out = actions.revert(args.part, args.file, args.reason)
    emit_record(
        args.json,
        out,
        lambda p: (
            f"reverted {p.part} ({'rule ' + ', '.join(p.rule['rules']) if p.rule else p.reason})"
            + (
                f"; defaults {p.restored_defaults} restored in {p.override}\n" + _effect_text(p.takes_effect)
                if p.restored_defaults and p.takes_effect
                else ""
            )
        ),
    )
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from frank.campaign import actions

    out = actions.history(args.file)
    emit_record(
        args.json,
        out,
        lambda p: "\n".join(
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(e['at']))}Z  {e['event']:<10} {e.get('part', '')}"
            f"  {e.get('by', '')}" + (f"  fired: {', '.join(e['fired'])}" if e.get("fired") else "")
            for e in p.events
        ),
    )
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    from frank.campaign import actions
    from frank.campaign.ledger import open_ledger
    from frank.campaign.watch import alert_lines, sweep

    checks = sweep(open_ledger(actions.resolve_path(args.file)))
    emit(
        args.json,
        {"new_checks": checks, "alerts": alert_lines(checks)},
        lambda p: "\n".join(p["alerts"]) or f"{len(p['new_checks'])} new check(s), no rule fired",
    )
    return 0


def watch_after_run() -> None:
    """Called at the end of `frank replay` and `frank experiment run`: check the finished run now and say so
    on stderr when a rule fired (the JSON on stdout stays one object)."""
    from frank.campaign import actions
    from frank.campaign.watch import alert_lines, sweep_file

    if not actions.default_path().exists():
        return
    try:
        lines = alert_lines(sweep_file(actions.default_path()))
    except Exception as exc:  # the run itself went fine: a watch problem must not turn it into a failure
        lines = [f"frank: the campaign's revert watch failed: {type(exc).__name__}: {exc}"]
    for line in lines:
        print(line, file=sys.stderr, flush=True)
