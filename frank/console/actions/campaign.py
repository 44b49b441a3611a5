"""Campaign actions (frank.campaign.actions, the CLI's `frank campaign` twin): adopt, serve, revert the
selected part, each after asking; a refusal shows its reason. `w` reads the campaign (and its watch) now."""

from __future__ import annotations

from frank.console.actions.base import Actions
from frank.console.host import Host
from frank.console.state import CampaignPart

ASK = {
    "adopt": "Adopt needs a confirmed registered run of its design ({design}); the newest one is "
    "recorded in the campaign's history.",
    "serve": "Its knob values {knobs} become the defaults of profile {profile} (a user profile "
    "override) for the next engine start. A passed part served on a policy call: use "
    "`frank campaign serve NAME --policy WHY`.",
    "revert": "Revert needs a revert rule that fired since it was served (with no fired rule: "
    "`frank campaign revert NAME --reason WHY`). Served defaults are put back.",
}


class CampaignActions(Actions):
    def __init__(self, host: Host, path: str | None = None) -> None:
        super().__init__(host)
        self.path = path

    def init(self, example: str | None) -> None:
        """`frank campaign init [--example NAME]`: a new campaign file (empty or a shipped example)."""
        if not self.host.guard("campaign init"):
            return
        path = self.path

        def run() -> str:
            from frank.campaign import actions

            out = actions.init(path, example)  # an existing file: recorded, or (with an example) refused
            verb = "created" if out.created else "recorded"
            return f"{verb} {out.file}: {len(out.parts)} parts ({', '.join(out.parts) or 'none yet'})"

        def done(message: str) -> None:
            self.host.notify(message, title="campaign init", timeout=10)
            self.host.switch_mode("campaign")
            self.host.read_campaign()

        what = f"a copy of the shipped example {example!r}" if example else "an empty campaign"
        self.host.confirm(
            "Create the campaign?",
            f"Writes {what} to the campaign file (campaign.toml in frank's config dir) and starts its history.",
            lambda: self.in_thread("campaign-action", run, done),
            "Create",
        )

    def act(self, call: str, part: CampaignPart | None) -> None:
        if part is None or not self.host.guard(f"{call} a part"):
            return
        body = ASK[call].format(design=part.design, knobs=part.knobs, profile=part.profile)
        self.host.confirm(f"{call} {part.name}?", body, lambda: self._run(call, part.name), call.capitalize())

    def _run(self, call: str, name: str) -> None:
        path = self.path

        def run() -> str:
            from frank.campaign import actions

            # a refusal raises: the app notifies it
            if call == "serve":
                served = actions.serve(name, path)
                return f"{name}: {served.state} — takes effect on {served.takes_effect.starts}"
            out = actions.adopt(name, path) if call == "adopt" else actions.revert(name, path)
            return f"{name}: {out.state}"

        def done(message: str) -> None:
            self.host.notify(message, title=f"campaign {call}", timeout=10)
            self.host.read_campaign()

        self.in_thread("campaign-action", run, done)
