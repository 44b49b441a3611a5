"""Experiments: designs and registered runs; register (hash, drawn order and smallest p shown before
confirming), run or resume detached, and a live per-block board of the selected run.

A run launched here is a job (frank.experiments.job, the same as `frank experiment run RUN_ID --detach`):
its own session, output to the run folder, so quitting the console or an SSH drop never touches it. The
board renders the experiments source's view (the followed run's journal folded); f measures fidelity as a
job (`frank fidelity run --detach`), f again cancels it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.widgets import DataTable, Header, Static

from frank.console.screens.base import FrankScreen
from frank.console.state import ConsoleState, DesignRow, ExperimentsView, ReportLine
from frank.console.widgets.fidelity_panel import FidelityPanel
from frank.console.widgets.footer import FrankFooter


def fmt_p(p: float | None, size: int | None = None) -> str:
    if p is None:
        return "–"
    from frank.experiments.exact import fraction

    return f"{fraction(p, size)} ({p:.4g})" if size else f"{p:.4g}"


class ExperimentsScreen(FrankScreen):
    TITLE = "experiments"
    BINDINGS = [
        Binding("g", "app.experiment_register", "register", id="experiments.register"),
        Binding("r", "app.experiment_run", "run", id="experiments.run"),
        Binding("X", "app.experiment_stop", "stop run", id="experiments.stop"),
        Binding("tab", "app.focus_next", "next table", id="experiments.focus_next", show=False),
        Binding("f", "app.fidelity", "fidelity", id="experiments.fidelity"),
    ]

    def compose(self) -> ComposeResult:
        yield Header(icon="≡")
        with Horizontal(id="exp-body"):
            with Vertical(id="exp-left"):
                yield Static("[bold]designs[/]  [$frank-idle]g registers the selected one[/]", classes="section")
                yield DataTable(id="designs", cursor_type="row")
                yield Static(
                    "[bold]registered runs[/]  [$frank-idle]r runs or resumes (detached)[/]", classes="section"
                )
                yield DataTable(id="runs", cursor_type="row")
            with Vertical(id="exp-right"):
                yield Static("", id="exp-head")
                yield DataTable(id="board", cursor_type="none")
                yield Static("", id="exp-tally")
                yield FidelityPanel(id="fidelity")
        yield FrankFooter()

    def on_mount(self) -> None:
        designs = self.query_one("#designs", DataTable)
        designs.add_columns("design", "kind", "question")
        runs = self.query_one("#runs", DataTable)
        runs.add_column("run", key="run")
        runs.add_column("status", key="status")
        self._board_kind: str | None = None
        self._seen: Any = None
        self._lists_seen: Any = None
        self._design_rows: dict[str, DesignRow] = {}
        designs.focus()
        self.render_state(self.host.state)

    def _show_lists(self, view: ExperimentsView) -> None:
        if (view.designs, view.runs) == self._lists_seen:
            return
        self._lists_seen = (view.designs, view.runs)
        table = self.query_one("#designs", DataTable)
        for row in view.designs:
            self._design_rows[row.path] = row
            if row.path not in table.rows:
                q = row.question
                table.add_row(row.name, row.kind, q[:48] + ("…" if len(q) > 48 else ""), key=row.path)
        runs_table = self.query_one("#runs", DataTable)
        for rid in view.runs:
            if rid not in runs_table.rows:
                runs_table.add_row(rid, "…", key=rid)
        followed = view.followed
        if followed and followed.run_id in runs_table.rows:
            runs_table.move_cursor(row=runs_table.get_row_index(followed.run_id))

    def selected_design(self) -> str | None:
        table = self.query_one("#designs", DataTable)
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def selected_run(self) -> str | None:
        table = self.query_one("#runs", DataTable)
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is None:
            return
        if event.data_table.id == "runs":
            self.host.follow_run(event.row_key.value)
        elif event.data_table.id == "designs" and self.host.state.experiments.followed is None:
            self.describe_design(str(event.row_key.value))  # rows are keyed by design name

    def describe_design(self, path: str) -> None:
        """The highlighted design in full (while no run is followed): question, arms, design and rule."""
        d = self._design_rows.get(path)
        if d is None:
            return
        arms = "  ".join(f"[bold]{escape(name)}[/] {escape(what)}" for name, what in d.arms)
        low = d.smallest_p
        lines = [
            f"[bold]{escape(d.name)}[/]  [$frank-idle]{escape(Path(path).name)}[/]",
            escape(d.question),
            "",
            f"[$frank-idle]arms[/] {arms}",
            f"[$frank-idle]design[/] {d.shape}",
            f"[$frank-idle]measure[/] {escape(d.measure)}   [$frank-idle]profile[/] {escape(d.profile)}",
            f"[$frank-idle]smallest p[/] {fmt_p(low, round(1 / low) if low else None)}",
            "",
            "[$frank-idle]g registers it: the order is drawn and shown before you confirm[/]",
        ]
        self.query_one("#exp-head", Static).update("\n".join(lines))

    def select_run(self, run_id: str) -> None:
        table = self.query_one("#runs", DataTable)
        if run_id not in table.rows:
            table.add_row(run_id, "registered", key=run_id)
        table.move_cursor(row=table.get_row_index(run_id))
        table.focus()

    # -- the board -------------------------------------------------------------------------------
    def render_state(self, console: ConsoleState) -> None:
        view = console.experiments
        if view is self._seen:
            return
        self._seen = view
        self._show_lists(view)
        self.query_one(FidelityPanel).show(view.fidelity)
        followed = view.followed
        state = followed.state if followed is not None else None
        if followed is None or state is None:
            if not str(self.query_one("#exp-head", Static).content):
                self.query_one("#exp-head", Static).update(
                    "[$frank-idle]select a registered run to follow it, or register a design (g)[/]"
                )
            return
        runs = self.query_one("#runs", DataTable)
        if state.run_id in runs.rows and runs.get_cell(state.run_id, "status") != state.status:
            runs.update_cell(state.run_id, "status", state.status)
        self._head(state)
        if followed.screen is not None:
            self._screen_board(state, followed.screen)
        else:
            self._board(state, followed.rule, followed.report)

    def _head(self, s: Any) -> None:
        style = {"running": "$frank-ok", "finished": "$frank-idle", "failed": "$frank-bad"}.get(s.status, "$frank-warn")
        cur = s.current
        current = (
            (
                f"start {cur.start} · {escape(cur.arm)}"
                + (f" · block {cur.block}" if cur.block else "")
                + f" · {escape(cur.phase)} (attempt {cur.attempts})"
            )
            if cur
            else "no cell running"
        )
        lines = [
            f"[bold]{escape(s.name)}[/]  [{style}]● {escape(s.status)}[/]"
            + (f"  [$frank-idle]runner pid {s.runner_pid}[/]" if s.runner_pid else ""),
            f"[$frank-idle]run[/] {escape(s.run_id)}",
            f"[$frank-idle]design sha256[/] {s.design_sha256[:16]}…  [$frank-idle]kind[/] {s.kind}",
            f"[$frank-idle]now[/] {current}",
        ]
        self.query_one("#exp-head", Static).update("\n".join(lines))

    def _board(self, s: Any, rule: Any, report: ReportLine | None) -> None:
        board = self.query_one("#board", DataTable)
        control, treatment = (rule.control, rule.treatment) if rule else ("control", "treatment")
        columns = (
            ("block", "control", "treatment", "effect", "sign")
            if s.kind == "blocks"
            else ("start", "arm", "value", "status")
        )
        if self._board_kind != f"{s.run_id}:{s.kind}":
            board.clear(columns=True)
            labels = {"control": control, "treatment": treatment}
            for col in columns:
                board.add_column(labels.get(col, col), key=col, width=max(10, len(labels.get(col, col))))
            self._board_kind = f"{s.run_id}:{s.kind}"
        rows: list[tuple[str, tuple[str, ...]]] = []
        if s.kind == "blocks":
            for b in s.blocks:
                cv, tv = b.values.get(control), b.values.get(treatment)
                effect = "voided" if b.voided else (f"{b.effect_pct:+.2f}%" if b.effect_pct is not None else "–")
                rows.append((f"b{b.block}", (str(b.block), _v(cv), _v(tv), effect, _sign(b.sign))))
        else:
            for c in s.cells:
                status = c.status + (f" ({c.phase})" if c.phase else "")
                rows.append((f"s{c.start}", (str(c.start), c.arm, _v(c.value), status)))
        for key, cells in rows:
            if key in board.rows:
                for col, value in zip(columns, cells):
                    if board.get_cell(key, col) != value:
                        board.update_cell(key, col, value)
            else:
                board.add_row(*cells, key=key)
        size = round(1 / s.smallest_p) if s.smallest_p else None
        meet = (
            "[$frank-ok]the rule can still be met[/]"
            if s.can_still_meet
            else "[$frank-bad]the rule can no longer be met[/]"
        )
        lines = [
            f"[$frank-idle]tally[/] {s.wins} won · {s.losses} lost · {s.ties} tied · {s.remaining} to go",
            meet,
            f"[$frank-idle]best p still possible[/] {fmt_p(s.best_possible_p, size)}   "
            f"[$frank-idle]design's smallest p[/] {fmt_p(s.smallest_p, size)}",
        ]
        if s.decided:
            d = s.decided
            lines.append(
                f"[bold]stopped when decided after {d['unit']} {d['after']} of {d['of']}[/] "
                f"[$frank-idle]({d['left']} not run): {escape(str(d['reason']))}[/]"
            )
        if report is not None:
            lines.append(
                f"[bold]p = {fmt_p(report.p_value, report.null_size)}   decision: {escape(report.decision)}[/]"
            )
        self.query_one("#exp-tally", Static).update("\n".join(lines))

    def _screen_board(self, s: Any, screen: Any) -> None:
        """A screen run: one row a setting, its value in each repeat so far, median, effect and wins against
        the control, and the pick (made once every cell is measured)."""
        board = self.query_one("#board", DataTable)
        repeats = tuple(f"r{i}" for i in range(1, screen.repeats + 1))
        columns = ("setting", *repeats, "median", "vs control", "wins")
        if self._board_kind != f"{s.run_id}:screen":
            board.clear(columns=True)
            width = max(len(r.name) for r in screen.settings) + 7  # room for " ◀ pick"
            for col in columns:  # a value is 0.04121 or -22.39%: each column as wide as its widest
                board.add_column(col, key=col, width=width if col == "setting" else max(7, len(col)))
            self._board_kind = f"{s.run_id}:screen"
        for r in screen.settings:
            effects = [e for e in r.effects_pct if e is not None]
            versus = "control" if r.is_control else (f"{sum(effects) / len(effects):+.2f}%" if effects else "–")
            name = r.name + (" ◀ pick" if r.name == screen.pick else "")
            cells = (
                name,
                *(_short(v) for v in r.values),
                _short(r.median),
                versus,
                "" if r.is_control else f"{r.wins}/{r.compared}",
            )
            if r.name in board.rows:
                for col, value in zip(columns, cells, strict=True):
                    if board.get_cell(r.name, col) != value:
                        board.update_cell(r.name, col, value)
            else:
                board.add_row(*cells, key=r.name)
        done = sum(1 for c in s.cells if c.status == "done")
        style = "$frank-ok" if screen.pick else "$frank-warn"
        lines = [
            f"[$frank-idle]screen[/] {done} of {len(s.cells)} cells · {screen.repeats} repeats · "
            f"measure {escape(screen.measure)} ({screen.direction} is better)",
            f"[{style}]pick:[/] {escape(screen.pick_reason)}",
            "[$frank-idle]a screen is not evidence: its pick goes on to a registered confirmation[/]",
        ]
        self.query_one("#exp-tally", Static).update("\n".join(lines))


def _short(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def _v(value: float | None) -> str:
    return "–" if value is None else f"{value:.6g}"


def _sign(sign: str | None) -> str:
    return {"+": "+ treatment wins", "-": "− treatment loses", "=": "= tie"}.get(sign or "", "–")
