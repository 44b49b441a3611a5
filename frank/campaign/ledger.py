"""The campaign's history: one JSON event a line, appended and fsynced, never rewritten.

It lives next to the campaign file (`campaign.toml` -> `campaign.history.jsonl`, 0600). Events:

- `init`       the file's hash and each part's hash (a recorded part is frozen from then on)
- `part_added` a part added to the file later (recorded by the next command that writes)
- `adopt`, `serve`, `revert`   a state change and the evidence it was checked against
- `check`      the revert watch checked a finished run against a served part's rules (fired or not)

A part's state is its declared state with its `adopt`/`serve`/`revert` events applied in order.
"""

from __future__ import annotations

import getpass
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frank import jsonl
from frank.campaign.exists import check_what_it_names
from frank.campaign.parts import Campaign, CampaignError, Part, PartState, load_campaign

if TYPE_CHECKING:
    from frank.engine.profiles import KnobValue

STATE_EVENTS: dict[str, PartState] = {"adopt": "adopted", "serve": "served", "revert": "reverted"}


def history_path(campaign_path: Path) -> Path:
    return campaign_path.with_name(f"{campaign_path.stem}.history.jsonl")


def read_history(path: Path) -> list[dict[str, Any]]:
    """Every whole event (frank.jsonl: a torn last line is skipped, a damaged one is an error)."""
    return [e for e in jsonl.read(path) if "event" in e]


def append_event(path: Path, event: str, **fields: Any) -> dict[str, Any]:
    record = {"event": event, "at": time.time(), "by": _user(), **fields}
    jsonl.append(path, record, sort_keys=True)
    return record


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


@dataclass(frozen=True)
class Ledger:
    """A campaign file with its history: the current state of every part."""

    campaign: Campaign
    history: tuple[dict[str, Any], ...]

    @property
    def history_file(self) -> Path:
        return history_path(self.campaign.path)

    def state(self, part: Part) -> PartState:
        state = part.state
        for event in self.events_for(part.name):
            state = STATE_EVENTS.get(event["event"], state)
        return state

    def since(self, part: Part, state: PartState) -> float | None:
        """When the part last entered `state` (the init time for a declared state)."""
        at = None
        if part.state == state:
            at = self.recorded_at(part.name)
        for event in self.events_for(part.name):
            if STATE_EVENTS.get(event["event"]) == state:
                at = event["at"]
        return at

    def events_for(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.history if e.get("part") == name]

    def recorded_at(self, name: str) -> float | None:
        for e in self.history:
            if (e["event"] == "init" and name in e.get("parts", {})) or (
                e["event"] == "part_added" and e.get("part") == name
            ):
                return float(e["at"])
        return None

    def recorded_hashes(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for e in self.history:
            if e["event"] == "init":
                out.update(e.get("parts", {}))
            elif e["event"] == "part_added":
                out[e["part"]] = e["sha256"]
        return out

    def replaced_defaults(self, part: str) -> dict[str, KnobValue] | None:
        """The profile defaults the part's last `serve` replaced (what reverting it restores), if any."""
        served = [e for e in self.events_for(part) if e["event"] == "serve"]
        previous = served[-1].get("previous_defaults") if served else None
        return dict(previous) if previous else None


def open_ledger(path: Path | str) -> Ledger:
    """Load the file and its history; refuse a recorded part that was edited since."""
    campaign = load_campaign(path)
    check_what_it_names(campaign)
    history = read_history(history_path(campaign.path))
    if not any(e["event"] == "init" for e in history):
        raise CampaignError(
            f"{campaign.path}: no history ({history_path(campaign.path).name}): record the file "
            f"first with `frank campaign init --file {campaign.path}`"
        )
    ledger = Ledger(campaign, tuple(history))
    recorded = ledger.recorded_hashes()
    for i, part in enumerate(campaign.parts):
        if part.name in recorded and recorded[part.name] != part.sha256:
            raise CampaignError(
                f"{campaign.path}:{part.line}: parts[{i}] ({part.name}): changed since it was "
                f"recorded; a recorded part is frozen (states change through `frank campaign "
                f"adopt|serve|revert`): restore it, or add a new part"
            )
    missing = sorted(set(recorded) - {p.name for p in campaign.parts})
    if missing:
        raise CampaignError(
            f"{campaign.path}: recorded part(s) {', '.join(missing)} were removed from the file; "
            f"a recorded part stays (revert it instead)"
        )
    return ledger


def record_new_parts(ledger: Ledger) -> Ledger:
    """Record parts added to the file since init (called by every command that writes)."""
    recorded = ledger.recorded_hashes()
    new = [p for p in ledger.campaign.parts if p.name not in recorded]
    for part in new:
        append_event(ledger.history_file, "part_added", part=part.name, sha256=part.sha256, state=part.state)
    return open_ledger(ledger.campaign.path) if new else ledger


def init_history(campaign: Campaign, example: str | None = None) -> float:
    """Record the campaign's parts as they are now (the history's `init` event); return when."""
    hist = history_path(campaign.path)
    if any(e["event"] == "init" for e in read_history(hist)):
        raise CampaignError(f"{campaign.path}: already recorded ({hist}); see `frank campaign status`")
    event = append_event(
        hist,
        "init",
        file=str(campaign.path),
        file_sha256=campaign.sha256,
        example=example,
        parts={p.name: p.sha256 for p in campaign.parts},
    )
    return float(event["at"])
