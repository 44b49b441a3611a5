"""Evidence, decided again from its source: published results under the design's frozen rule
(`frank experiment analyze`), a registered run's report, or a policy call in words.

`confirmed_runs` finds the registered runs of a part's design (same canonical hash) and decides each one;
`adopt` needs one whose decision is confirmed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from frank import readfile
from frank.campaign.parts import Campaign, CampaignError, Evidence, Part
from frank.errors import FrankError
from frank.experiments.design import Design, load_design

if TYPE_CHECKING:
    from frank.experiments.analysis import ExperimentReport


def part_design(campaign: Campaign, part: Part, ref: str = "") -> tuple[Design, str]:
    ref = ref or part.design
    if not ref:
        raise CampaignError(f"{campaign.path}:{part.line}: parts ({part.name}).design: the part names no design")
    path = campaign.resolve(ref)
    try:
        return load_design(path), str(path)
    except FrankError as exc:
        if _is_screen(path):  # not a design because it is a screen: say so, not which field it lacks
            raise CampaignError(f"{path}: design: this is a screen: {SCREEN_REFUSAL}") from None
        raise CampaignError(f"{campaign.path}:{part.line}: part {part.name}: design {ref}: {exc}") from None


class BlockEntry(TypedDict):
    """One block of a blocks design as the evidence's decision counted it."""

    block: int
    effect_pct: float | None  # the treatment against the control (None: not complete, or voided)
    sign: str | None  # "+" the treatment won in the rule's direction, "-" lost, "=" a tie
    voided: bool


class EvidenceEntry(TypedDict, total=False):
    """One evidence entry as `frank campaign status` shows it: from the file (decided again from its results
    or run, or a policy call) or from the history (an adopt, serve or revert)."""

    state: str
    date: str
    note: str
    source: str  # results | run | policy | history
    policy: str | None
    design: str
    results: str
    results_run_id: str  # results exported from a registered run
    run_id: str | None
    decision: str | None
    reason: str | None
    p: float | None
    p_fraction: str | None
    design_sha256: str | None
    mean_effect_pct: float | None
    blocks: list[BlockEntry]  # a blocks design's blocks as decided: each effect and its sign
    stopped: str | None  # the block it stopped at when decided (a design that stops when decided)
    awaited: bool  # a file the part awaited, decided again now it is there
    ok: bool
    problem: str
    at: float  # history entries: when, by whom, on which fired rule
    by: str | None
    rule: dict[str, Any] | None


def _summary(report: ExperimentReport) -> EvidenceEntry:
    """What status shows of a decision (the report's `Decision`, read through its fields)."""
    d = report.decision
    out = EvidenceEntry(
        decision=d.verdict,
        reason=d.reason,
        p=d.p_value,
        p_fraction=d.p_fraction,
        design_sha256=d.design_sha256,
        mean_effect_pct=d.mean_effect_pct,
    )
    if report.blocks is not None:  # the blocks that decided it, the ones never run left out
        out["blocks"] = [
            BlockEntry(block=b.block, effect_pct=b.effect_pct, sign=b.sign, voided=b.voided)
            for b in report.blocks.blocks
            if b.voided or b.sign is not None
        ]
        out["stopped"] = report.stopped_when_decided.summary() if report.stopped_when_decided else None
    return out


def check_evidence(campaign: Campaign, part: Part, ev: Evidence) -> EvidenceEntry:
    """One evidence entry as status shows it: its source and the decision taken again from it."""
    out = EvidenceEntry(state=ev.state, date=ev.date, note=ev.note)
    if ev.policy:
        out |= EvidenceEntry(source="policy", policy=ev.policy, decision="policy call", ok=True)
        return out
    try:
        design, design_path = part_design(campaign, part, ev.design)
        out["design"] = str(design_path)
        if ev.results:
            from frank.experiments.analysis import analyze
            from frank.experiments.results_csv import read_results_csv, results_provenance

            results = campaign.resolve(ev.results)
            if _is_screen_record(results):
                raise CampaignError(f"{results}: results: this is a screen's record: {SCREEN_REFUSAL}")
            report = analyze(design, read_results_csv(results, design), source="external")
            out |= EvidenceEntry(source="results", results=str(results))
            out |= _summary(report)
            # exported from a registered run (`frank experiment report RUN --csv`): its design hash was
            # checked by read_results_csv; the run id says which run's report holds the guards
            exported = results_provenance(readfile.read_text(results, readfile.CSV, CampaignError)).get("run")
            if exported:
                out["results_run_id"] = exported[1]
        else:
            report = run_report(ev.run)
            out |= EvidenceEntry(source="run", run_id=report.run.run_id if report.run else ev.run)
            out |= _summary(report)
            if report.design_sha256 != design.sha256:
                out |= EvidenceEntry(
                    ok=False,
                    problem=f"run {ev.run} is of design {report.design_sha256[:12]}…, the part's "
                    f"design is {design.sha256[:12]}…",
                )
                return out
    except FrankError as exc:
        out |= EvidenceEntry(
            source=out.get("source", "results" if ev.results else "run"),
            decision="unreadable",
            ok=False,
            problem=str(exc),
        )
        return out
    if ev.state == "testing":  # a test's outcome, whatever it decided: it supports no passed state
        out["ok"] = True
        return out
    if ev.state == "rejected":  # turned down: the run it points at must not have confirmed the part
        out["ok"] = out["decision"] == "not confirmed"
        if not out["ok"]:
            out["problem"] = (
                f"a rejection needs a run whose rule decides not confirmed; this one decides {out['decision']}"
            )
        return out
    out["ok"] = out["decision"] == "confirmed"
    if not out["ok"]:
        out["problem"] = f"the rule decides {out['decision']}: {out.get('reason')}"
    return out


def blocks_text(e: EvidenceEntry) -> str:
    """The blocks that decided an evidence entry, in words: each block's effect and sign, and where the
    design stopped when decided ("" for an entry with no blocks: a policy call, a balanced design)."""
    cells = [
        f"{b['block']} voided" if b["voided"] else f"{b['block']} {b['effect_pct']:+.2f}% {b['sign']}"
        for b in e.get("blocks") or []
        if b["voided"] or b["effect_pct"] is not None
    ]
    if not cells:
        return ""
    return "blocks " + ", ".join(cells) + (f"; {e['stopped']}" if e.get("stopped") else "")


SCREEN_REFUSAL = (
    "a screen picks a candidate; only a registered confirmation decides (a screen looks at many settings and "
    "keeps the best, so it is never evidence: register the confirmation design its report writes, `frank "
    "experiment screen --report RUN --design-out FILE.toml`, and run that)"
)


def run_report(run_id: str) -> ExperimentReport:
    from frank.experiments import registry
    from frank.experiments.report import report_for_run

    run = registry.load_run(run_id)
    if run.meta.get("kind") == "screen":
        raise CampaignError(f"run {run.run_id} is a screen: {SCREEN_REFUSAL}")
    return report_for_run(run)


def screen_kind(path: Path) -> str | None:
    """What screen a file is ("a screen file", "a screen's record"), or None when it is none."""
    if _is_screen_record(path):
        return "a screen's record"
    return "a screen file" if _is_screen(path) else None


def _is_screen(path: Any) -> bool:
    """The file parses as a screen (frank.experiments.screen)."""
    from frank.experiments.design import read_source
    from frank.experiments.screen import parse_screen_text

    try:
        parse_screen_text(read_source(path), str(path))
    except FrankError:
        return False
    return True


def _is_screen_record(path: Any) -> bool:
    """The file is a screen's exported record (frank.experiments.screen_report), whatever its key order."""
    from frank.experiments.screen_report import RECORD_FORMATS

    try:
        return readfile.read_object(path).get("format") in RECORD_FORMATS
    except FrankError:
        return False


def confirmed_runs(campaign: Campaign, part: Part) -> tuple[Design, list[dict[str, Any]]]:
    """Every registered run of the part's design (matching canonical hash), newest first, each decided."""
    from frank.experiments import registry

    design, _ = part_design(campaign, part)
    out = []
    for meta in reversed(registry.list_runs()):
        if meta.get("design_sha256") != design.sha256:
            continue
        try:
            out.append({"run_id": meta["run_id"], **_summary(run_report(meta["run_id"]))})
        except FrankError as exc:
            out.append({"run_id": meta["run_id"], "decision": "unreadable", "reason": str(exc)})
    return design, out
