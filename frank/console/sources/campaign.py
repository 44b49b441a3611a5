"""The campaign (frank.campaign.actions, the CLI's `frank campaign` twin): the parts as a board, their
evidence and revert rules, and what is up next. While the campaign screen is up the status is read every
WANTED_S; otherwise only the revert watch runs, every WATCH_S, so a rule that fires shows on any screen.
The status is a read (it writes nothing); the watch records its checks, except in a read-only console, where
the pending checks are only computed and a fired rule is told once."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from frank.campaign.results import PartStatus
from frank.console.messages import CampaignRead
from frank.console.sources.base import Post, Source
from frank.console.state import CampaignPart, CampaignView
from frank.errors import FrankError

WANTED_S = 5.0
WATCH_S = 10.0


class CampaignSource(Source[CampaignView]):
    name = "campaign"

    def __init__(self, post: Post, path: str | None = None, *, read_only: bool = False) -> None:
        super().__init__(post)
        self.path = path  # None: the config dir's campaign.toml
        self.read_only = read_only
        self._reads = 0
        self._told: set[tuple[str, str, str]] = set()  # checks already told (read-only: they stay pending)

    def message(self, view: CampaignView) -> CampaignRead:
        return CampaignRead(view)

    def interval(self) -> float:
        return WANTED_S if self.wanted else WATCH_S

    def read(self) -> CampaignView:
        from frank.campaign import actions
        from frank.campaign.watch import sweep_file

        path = actions.resolve_path(self.path)
        last = self.last or CampaignView()
        if not path.exists():
            return CampaignView(
                file=str(path),
                problem=f"no campaign at {path}: create one with ctrl+p: Campaign: init (or `frank campaign init`, "
                "`--example seed`)",
            )
        if not self.wanted and last.parts:  # nobody looks at the board: only the watch
            fired = self._fired(sweep_file(path, record=not self.read_only))
            if not fired:
                return last
            self._reads += 1
            return replace(last, fired=fired, read=self._reads)
        try:
            checks = sweep_file(path, record=not self.read_only)
            status = actions.status(path)
        except FrankError as exc:  # a broken campaign file is shown on the board
            return CampaignView(file=str(path), problem=f"campaign error: {exc}")
        fired = self._fired(checks)
        if fired:
            self._reads += 1
        return CampaignView(
            file=status.file,
            name=status.name,
            alerts=status.alerts,
            parts=tuple(part_view(p) for p in status.parts),
            fired=fired,
            read=self._reads,
        )

    def _fired(self, checks: list[dict[str, Any]]) -> tuple[str, ...]:
        """Alert lines for the checks not told yet."""
        from frank.campaign.watch import alert_lines

        new = [c for c in checks if (c["part"], c["run_kind"], c["run_id"]) not in self._told]
        self._told.update((c["part"], c["run_kind"], c["run_id"]) for c in new)
        return tuple(alert_lines(new))


def part_view(p: PartStatus) -> CampaignPart:
    return CampaignPart(
        name=p.name,
        state=p.state,
        evidence=_evidence_cell(p),
        rules=_rules_cell(p),
        up_next=p.up_next,
        detail=_detail(p),
        profile=p.profile,
        knobs=str(p.knobs),
        design=p.design or "-",
    )


def _evidence_cell(p: PartStatus) -> str:
    """The newest decided evidence (decision, p, design hash), and whether a policy call came after it."""
    decided = [e for e in p.evidence if e.get("source") != "policy"]
    policy = bool(p.evidence) and p.evidence[-1].get("source") == "policy"
    if not decided and p.awaits_evidence:
        missing = sum(1 for a in p.awaiting if not a.there)
        return f"awaited: {missing} file{'s' if missing > 1 else ''} not made yet, not decided"
    if not decided:
        return "policy call" if policy else "none"
    e = decided[-1]
    bits = [f"{e['state']}: {e.get('decision') or '-'}"]
    if e.get("p_fraction"):
        bits.append(f"p = {e['p_fraction']}")
    sha = e.get("design_sha256")
    if sha:
        bits.append(sha[:10])
    return ", ".join(bits) + (" (!)" if not e.get("ok", True) else "") + (" + policy call" if policy else "")


def _rules_cell(p: PartStatus) -> str:
    """FIRED names first; otherwise how many rules each last check left ok, unchecked or not checked."""
    if not p.revert_rules:
        return "none"
    fired = [r.name for r in p.revert_rules if r.fired]
    if fired:
        return "FIRED: " + ", ".join(fired)
    counts: dict[str, int] = {}
    for r in p.revert_rules:
        outcome = r.last_check.outcome if r.last_check else "not checked"
        counts[outcome] = counts.get(outcome, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in counts.items())


def _detail(p: PartStatus) -> str:
    from frank.campaign.evidence import blocks_text

    knobs = " ".join(f"{k}={v}" for k, v in p.knobs.items()) or "no knob values (the profile itself)"
    lines = [
        f"{p.name} — {p.title}",
        f"state {p.state.upper()}  ·  profile {p.profile}: {knobs}",
        f"design {p.design or '-'}  {p.design_sha256 or ''}",
        "",
        "evidence:",
    ]
    for e in p.evidence:
        what = (
            e.get("policy")
            if e.get("source") == "policy"
            else (
                f"{e.get('decision')}"
                + (f", p = {e['p_fraction']}" if e.get("p_fraction") else "")
                + (f", run {e['run_id']}" if e.get("run_id") else "")
                + (f" — {e['reason']}" if e.get("reason") else "")
            )
        )
        source = f"{e.get('source')}{' (awaited, here now)' if e.get('awaited') else ''}"
        lines.append(
            f"  {e['state']:<9} {e.get('date') or '':<10} {source}: {what}"
            + ("" if e.get("ok", True) else f"  PROBLEM: {e.get('problem')}")
        )
        blocks = blocks_text(e) if e.get("state") == "rejected" or e.get("awaited") else ""
        if blocks:  # the blocks that decided it
            lines.append(f"  {'':<9} {'':<10} {blocks}")
    if not p.evidence:
        lines.append("  none yet: not decided" if p.awaits_evidence else "  none")
    if p.awaiting:
        lines += ["", "awaits:"]
        lines += [f"  {a.describe()}" for a in p.awaiting]
    lines += ["", "revert rules:"]
    for r in p.revert_rules:
        last = r.last_check
        lines.append(
            f"  {r.name} ({r.kind}): "
            + (f"{last.outcome} on {last.run_kind} {last.run_id} — {last.detail}" if last else "not checked yet")
        )
    if not p.revert_rules:
        lines.append("  none")
    lines += ["", f"up next: {p.up_next}"]
    if p.next:
        lines.append(f"         {p.next}")
    if p.notes:
        lines += ["", f"notes: {p.notes}"]
    return "\n".join(lines)
