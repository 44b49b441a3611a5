"""Campaign (key 5): the parts as a board (state, evidence, revert rules and their last check, what is up
next), the selected part in detail, and its actions: A adopt, S serve, V revert, w check finished runs now.

Everything comes from frank.campaign.actions (the CLI's `frank campaign` twin): the status is read in a
thread worker every few seconds; a read writes nothing, and shows the checks not recorded yet, so a rule that
fires shows here at once. The app-wide watch (`install_watch`) records the checks and notifies a fired rule on
any screen; in read-only mode it only notifies. Actions ask first and are off in read-only mode; the
evidence checks are the headless layer's, so a refused adoption shows its reason.
"""

from __future__ import annotations

from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Header, Static

from frank.console.screens.base import FrankScreen
from frank.console.screens.confirm import ConfirmDialog
from frank.console.widgets.footer import FrankFooter

REFRESH_S = 5.0
COLUMNS = (
    ("part", "part"),
    ("state", "state"),
    ("evidence", "evidence (decision, p, design)"),
    ("rules", "revert rules: last check"),
    ("next", "up next"),
)
ACTIONS = {"campaign_adopt", "campaign_serve", "campaign_revert"}


def _evidence_cell(p: dict[str, Any]) -> str:
    """The newest decided evidence (decision, p, design hash), and whether a policy call came after it."""
    decided = [e for e in p["evidence"] if e.get("source") != "policy"]
    policy = bool(p["evidence"]) and p["evidence"][-1].get("source") == "policy"
    if not decided:
        return "policy call" if policy else "none"
    e = decided[-1]
    bits = [f"{e['state']}: {e.get('decision') or '-'}"]
    if e.get("p_fraction"):
        bits.append(f"p = {e['p_fraction']}")
    if e.get("design_sha256"):
        bits.append(e["design_sha256"][:10])
    return ", ".join(bits) + (" (!)" if not e.get("ok", True) else "") + (" + policy call" if policy else "")


def _rules_cell(p: dict[str, Any]) -> str:
    """FIRED names first; otherwise how many rules each last check left ok, unchecked or not checked."""
    rules = p["revert_rules"]
    if not rules:
        return "none"
    fired = [r["name"] for r in rules if (r["last_check"] or {}).get("outcome") == "fired"]
    if fired:
        return "FIRED: " + ", ".join(fired)
    counts: dict[str, int] = {}
    for r in rules:
        outcome = (r["last_check"] or {}).get("outcome", "not checked")
        counts[outcome] = counts.get(outcome, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in counts.items())


def _detail(p: dict[str, Any]) -> str:
    knobs = " ".join(f"{k}={v}" for k, v in p["knobs"].items()) or "no knob values (the profile itself)"
    lines = [
        f"{p['name']} — {p['title']}",
        f"state {p['state'].upper()}  ·  profile {p['profile']}: {knobs}",
        f"design {p['design'] or '-'}  {p['design_sha256'] or ''}",
        "",
        "evidence:",
    ]
    for e in p["evidence"]:
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
        lines.append(
            f"  {e['state']:<9} {e.get('date') or '':<10} {e.get('source')}: {what}"
            + ("" if e.get("ok", True) else f"  PROBLEM: {e.get('problem')}")
        )
    lines += ["", "revert rules:"]
    for r in p["revert_rules"] or []:
        last = r["last_check"]
        lines.append(
            f"  {r['name']} ({r['kind']}): "
            + (
                f"{last['outcome']} on {last['run_kind']} {last['run_id']} — {last['detail']}"
                if last
                else "not checked yet"
            )
        )
    if not p["revert_rules"]:
        lines.append("  none")
    lines += ["", f"up next: {p['up_next']}"]
    if p["next"]:
        lines.append(f"         {p['next']}")
    if p["notes"]:
        lines += ["", f"notes: {p['notes']}"]
    return "\n".join(lines)


class CampaignScreen(FrankScreen):
    TITLE = "campaign"
    DEFAULT_CSS = """
    CampaignScreen #campaign-status { height: auto; padding: 0 1; }
    CampaignScreen #parts-board { height: auto; max-height: 14; }
    CampaignScreen #part-detail { height: 1fr; padding: 0 1; }
    """
    BINDINGS = [
        Binding("A", "campaign_adopt", "adopt", id="campaign.adopt"),
        Binding("S", "campaign_serve", "serve", id="campaign.serve"),
        Binding("V", "campaign_revert", "revert", id="campaign.revert"),
        Binding("w", "campaign_watch", "watch now", id="campaign.watch"),
    ]

    def __init__(self, path: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.path = path  # None: the config dir's campaign.toml
        self.data: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield Header(icon="≡")
        yield Static("reading the campaign…", id="campaign-status", markup=False)
        yield DataTable(id="parts-board", cursor_type="row")
        with VerticalScroll(id="part-detail"):
            yield Static("", id="part-text", markup=False)
        yield FrankFooter()

    def on_mount(self) -> None:
        table = self.query_one("#parts-board", DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        table.focus()
        self.load()
        self.set_interval(REFRESH_S, self._tick)

    def _tick(self) -> None:
        if self.is_current:  # a mode left behind costs nothing; the app-wide watch still runs
            self.load()

    def refresh_view(self) -> None:  # the app's tick: the campaign has its own, slower timer
        pass

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ACTIONS and getattr(self.app, "read_only", False):
            return None  # greyed out in the footer
        return True

    # -- reading -----------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="campaign", exit_on_error=False)
    def load(self) -> None:
        from frank.campaign import actions
        from frank.errors import FrankError

        path = actions.resolve_path(self.path)
        if not path.exists():
            self.app.call_from_thread(self._show_missing, str(path))
            return
        try:
            data = actions.status(path)
        except FrankError as exc:
            self.app.call_from_thread(self._show_error, str(exc))
            return
        self.app.call_from_thread(self._show, data)

    def _show_missing(self, path: str) -> None:
        self.query_one("#campaign-status", Static).update(
            f"no campaign at {path}: create one with `frank campaign init` (or `--example seed`)"
        )

    def _show_error(self, message: str) -> None:
        self.query_one("#campaign-status", Static).update(f"campaign error: {message}")

    def _show(self, data: dict[str, Any]) -> None:
        self.data = data
        head = f"campaign {data['name']} — {data['file']}" + (
            " · read-only" if getattr(self.app, "read_only", False) else ""
        )
        self.query_one("#campaign-status", Static).update("\n".join([head, *data["alerts"]]))
        table = self.query_one("#parts-board", DataTable)
        for p in data["parts"]:
            cells = {
                "part": p["name"],
                "state": p["state"].upper(),
                "evidence": _evidence_cell(p),
                "rules": _rules_cell(p),
                "next": p["up_next"],
            }
            if p["name"] in table.rows:
                for key, value in cells.items():
                    table.update_cell(p["name"], key, value)
            else:
                table.add_row(*cells.values(), key=p["name"])
        self._show_detail()

    def _selected(self) -> dict[str, Any] | None:
        if not self.data or not self.data["parts"]:
            return None
        table = self.query_one("#parts-board", DataTable)
        row = min(max(table.cursor_row, 0), len(self.data["parts"]) - 1)
        return self.data["parts"][row]

    def _show_detail(self) -> None:
        part = self._selected()
        self.query_one("#part-text", Static).update(_detail(part) if part else "no parts yet")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    # -- actions -------------------------------------------------------------------------------------------
    def _act(self, what: str, body: str, call: str) -> None:
        app: Any = self.app
        part = self._selected()
        if part is None or not app.guard(f"{what} a part"):
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._run_action(call, part["name"])

        app.push_screen(ConfirmDialog(f"{what} {part['name']}?", body.format(**part), yes=what.capitalize()), answered)

    def action_campaign_adopt(self) -> None:
        self._act(
            "adopt",
            "Adopt needs a confirmed registered run of its design ({design}); the newest one is "
            "recorded in the campaign's history.",
            "adopt",
        )

    def action_campaign_serve(self) -> None:
        self._act(
            "serve",
            "Its knob values {knobs} become the defaults of profile {profile} (a user profile "
            "override) for the next engine start. A passed part served on a policy call: use "
            "`frank campaign serve NAME --policy WHY`.",
            "serve",
        )

    def action_campaign_revert(self) -> None:
        self._act(
            "revert",
            "Revert needs a revert rule that fired since it was served (with no fired rule: "
            "`frank campaign revert NAME --reason WHY`). Served defaults are put back.",
            "revert",
        )

    def action_campaign_watch(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, group="campaign-action", exit_on_error=False)
    def _run_action(self, call: str, name: str) -> None:
        from frank.campaign import actions

        out = getattr(actions, call)(name, self.path)  # a refusal raises: the base screen notifies it
        message = f"{name}: {out['state']}"
        if call == "serve":
            message += f" — takes effect on {out['takes_effect']['starts']}"
        self.app.call_from_thread(self.app.notify, message, title=f"campaign {call}", timeout=10)
        self.app.call_from_thread(self.load)


def notify_fired(app: Any, checks: list[dict[str, Any]]) -> None:
    from frank.campaign.watch import alert_lines

    for line in alert_lines(checks):
        app.notify(line, title="revert rule fired", severity="error", timeout=30)


def install_watch(app: Any, every_s: float = 10.0) -> None:
    """The app-wide revert watch: a fired rule shows as a notification on whatever screen is up."""

    record = not getattr(app, "read_only", False)  # a read-only console never writes the history
    told: set[tuple[str, str, str]] = set()

    def sweep() -> None:
        from frank.campaign import actions
        from frank.campaign.watch import sweep_file

        if actions.default_path().exists():
            checks = sweep_file(actions.default_path(), record=record)
            checks = [c for c in checks if (c["part"], c["run_kind"], c["run_id"]) not in told]
            told.update((c["part"], c["run_kind"], c["run_id"]) for c in checks)  # unrecorded ones: tell once
            if checks:
                app.call_from_thread(notify_fired, app, checks)

    app.set_interval(
        every_s, lambda: app.run_worker(sweep, thread=True, exclusive=True, group="campaign-watch", exit_on_error=False)
    )
