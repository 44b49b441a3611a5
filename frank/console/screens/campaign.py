"""Campaign (key 5): the parts as a board (state, evidence, revert rules and their last check, what is up
next), the selected part in detail, and its actions: A adopt, S serve, V revert, w read it now.

The campaign source (frank.console.sources.campaign) reads frank.campaign.actions (the CLI's `frank campaign`
twin) every few seconds while this screen is up, and runs the revert watch on any screen, so a rule that
fires shows as a notification at once. Actions ask first and are off in read-only mode; the evidence checks
are the headless layer's, so a refused adoption shows its reason.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Header, Static

from frank.console.screens.base import FrankScreen
from frank.console.state import CampaignPart, CampaignView, ConsoleState
from frank.console.widgets.footer import FrankFooter

COLUMNS = (
    ("part", "part"),
    ("state", "state"),
    ("evidence", "evidence (decision, p, design)"),
    ("rules", "revert rules: last check"),
    ("next", "up next"),
)
ACTIONS = {"campaign_adopt", "campaign_serve", "campaign_revert"}


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

    def compose(self) -> ComposeResult:
        yield Header(icon="≡")
        yield Static("reading the campaign…", id="campaign-status", markup=False)
        yield DataTable(id="parts-board", cursor_type="row")
        with VerticalScroll(id="part-detail"):
            yield Static("", id="part-text", markup=False)
        yield FrankFooter()

    def on_mount(self) -> None:
        self.view: CampaignView | None = None
        table = self.query_one("#parts-board", DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        table.focus()
        self.render_state(self.host.state)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ACTIONS and self.host.read_only:
            return None  # greyed out in the footer
        return True

    def render_state(self, state: ConsoleState) -> None:
        view = state.campaign
        if view is self.view or (not view.file and not view.problem):
            return  # nothing new, or nothing read yet
        self.view = view
        status = self.query_one("#campaign-status", Static)
        if view.problem:
            status.update(view.problem)
            return
        head = f"campaign {view.name} — {view.file}" + (" · read-only" if self.host.read_only else "")
        status.update("\n".join([head, *view.alerts]))
        table = self.query_one("#parts-board", DataTable)
        for p in view.parts:
            cells = {
                "part": p.name,
                "state": p.state.upper(),
                "evidence": p.evidence,
                "rules": p.rules,
                "next": p.up_next,
            }
            if p.name in table.rows:
                for key, value in cells.items():
                    table.update_cell(p.name, key, value)
            else:
                table.add_row(*cells.values(), key=p.name)
        self._show_detail()

    def selected_part(self) -> CampaignPart | None:
        if self.view is None or not self.view.parts:
            return None
        table = self.query_one("#parts-board", DataTable)
        return self.view.parts[min(max(table.cursor_row, 0), len(self.view.parts) - 1)]

    def _show_detail(self) -> None:
        part = self.selected_part()
        self.query_one("#part-text", Static).update(
            part.detail
            if part
            else "no parts yet: add one to the campaign file (docs/campaign.md), or ctrl+p: Campaign: init from "
            "an example"
        )

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def action_campaign_adopt(self) -> None:
        self.host.campaign_action("adopt", self.selected_part())

    def action_campaign_serve(self) -> None:
        self.host.campaign_action("serve", self.selected_part())

    def action_campaign_revert(self) -> None:
        self.host.campaign_action("revert", self.selected_part())

    def action_campaign_watch(self) -> None:
        self.host.read_campaign()
