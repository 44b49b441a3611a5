"""Experiments: designs and registered runs; register (hash, drawn order and smallest p shown before
confirming), run or resume detached, and a live per-block board of the selected run.

A run launched here is a job (frank.experiments.job, the same as `frank experiment run RUN_ID --detach`):
its own session, output to the run folder, so quitting the console or an SSH drop never touches it. The
board is rebuilt from the run's journal by the app's status poll, which posts ExperimentFolded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.widgets import DataTable, Header, Static

from frank.console.messages import ExperimentFolded
from frank.console.screens.base import FrankScreen
from frank.console.widgets.fidelity_panel import FidelityPanel
from frank.console.widgets.footer import FrankFooter
from frank.experiments.registry import BUILTIN_DESIGNS, design_files  # noqa: F401  (tests patch design_files)


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
        Binding("f", "fidelity_run", "fidelity", id="experiments.fidelity"),
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

    def action_fidelity_run(self) -> None:
        if not getattr(self.app, "read_only", False):
            self.query_one(FidelityPanel).start_run()

    def on_mount(self) -> None:
        designs = self.query_one("#designs", DataTable)
        designs.add_columns("design", "kind", "question")
        runs = self.query_one("#runs", DataTable)
        runs.add_column("run", key="run")
        runs.add_column("status", key="status")
        self._board_kind: str | None = None
        self.load_lists()
        self.query_one("#designs", DataTable).focus()

    @work(thread=True, exclusive=True, group="exp-lists", exit_on_error=False)
    def load_lists(self) -> None:
        from frank.experiments import registry
        from frank.experiments.design import load_design

        designs = []
        for path in design_files():
            try:
                d = load_design(path)
                designs.append((str(path), d.name, d.kind, d.question))  # noqa: PERF401
            except Exception as exc:  # a broken design is listed with its error, never hides the others
                designs.append((str(path), path.stem, "error", str(exc)))
        runs = registry.list_runs()
        self.app.call_from_thread(self._show_lists, designs, runs)

    def _show_lists(self, designs: list[tuple], runs: list[dict[str, Any]]) -> None:
        table = self.query_one("#designs", DataTable)
        for path, name, kind, question in designs:
            if path not in table.rows:
                table.add_row(name, kind, question[:48] + ("…" if len(question) > 48 else ""), key=path)
        runs_table = self.query_one("#runs", DataTable)
        for meta in sorted(runs, key=lambda m: m.get("registered_at", ""), reverse=True):
            rid = meta["run_id"]
            if rid not in runs_table.rows:
                runs_table.add_row(rid, "…", key=rid)
        app = self.frank
        if app.followed_run and app.followed_run in runs_table.rows:
            runs_table.move_cursor(row=runs_table.get_row_index(app.followed_run))

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
        app = self.frank
        if event.data_table.id == "runs":
            app.follow_run(event.row_key.value)
        elif event.data_table.id == "designs" and app.experiment_state is None:
            self.describe_design(event.row_key.value)

    @work(thread=True, exclusive=True, group="exp-design", exit_on_error=False)
    def describe_design(self, path: str) -> None:
        """The highlighted design in full (while no run is followed): question, arms, design and rule."""
        from frank.experiments import exact
        from frank.experiments.design import load_design

        d = load_design(path)
        arms = "  ".join(f"[bold]{escape(a.name)}[/] {escape(str(a.knob_dict or a.profile))}" for a in d.arms)
        shape = (
            f"{d.blocks} blocks of one start per arm"
            if d.kind == "blocks"
            else f"{d.starts_per_arm}+{d.starts_per_arm} starts in one balanced order"
            if d.kind == "balanced"
            else "measures taken elsewhere (frank experiment analyze)"
        )
        low = exact.smallest_p(d)
        lines = [
            f"[bold]{escape(d.name)}[/]  [$frank-idle]{escape(Path(path).name)}[/]",
            escape(d.question),
            "",
            f"[$frank-idle]arms[/] {arms}",
            f"[$frank-idle]design[/] {shape}",
            f"[$frank-idle]measure[/] {escape(d.measure)}   [$frank-idle]profile[/] {escape(d.profile)}",
            f"[$frank-idle]smallest p[/] {fmt_p(low, round(1 / low) if low else None)}",
            "",
            "[$frank-idle]g registers it: the order is drawn and shown before you confirm[/]",
        ]
        self.app.call_from_thread(self._show_design, "\n".join(lines))

    def _show_design(self, markup: str) -> None:
        app = self.frank
        if app.experiment_state is None:
            self.query_one("#exp-head", Static).update(markup)

    def add_run(self, run_id: str) -> None:
        table = self.query_one("#runs", DataTable)
        if run_id not in table.rows:
            table.add_row(run_id, "registered", key=run_id)
        table.move_cursor(row=table.get_row_index(run_id))
        table.focus()

    def on_experiment_folded(self, message: ExperimentFolded) -> None:
        self.refresh_view()

    # -- the board -------------------------------------------------------------------------------
    def refresh_view(self) -> None:
        app = self.frank
        state = app.experiment_state
        if state is None:
            if not str(self.query_one("#exp-head", Static).content):
                self.query_one("#exp-head", Static).update(
                    "[$frank-idle]select a registered run to follow it, or register a design (g)[/]"
                )
            return
        runs = self.query_one("#runs", DataTable)
        if state.run_id in runs.rows and runs.get_cell(state.run_id, "status") != state.status:
            runs.update_cell(state.run_id, "status", state.status)
        self._head(state)
        self._board(state)

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

    def _board(self, s: Any) -> None:
        board = self.query_one("#board", DataTable)
        app = self.frank
        rule = app.experiment_rule
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
        report = app.experiment_report
        if report:
            lines.append(
                f"[bold]p = {fmt_p(report.get('p_value'), report.get('null_size'))}   "
                f"decision: {escape(str(report.get('decision')))}[/]"
            )
        self.query_one("#exp-tally", Static).update("\n".join(lines))


def _v(value: float | None) -> str:
    return "–" if value is None else f"{value:.6g}"


def _sign(sign: str | None) -> str:
    return {"+": "+ treatment wins", "-": "− treatment loses", "=": "= tie"}.get(sign or "", "–")
