"""Experiment actions: register a design (the drawn order shown before confirming), run or resume it as a
detached job (frank.experiments.job), stop it (asks first), and follow a run's journal.

The status poll folds the followed run's journal (`read_experiment`, in the poll's thread) and posts
ExperimentFolded; a console started while a runner is alive adopts that run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import work

from frank.console.messages import ExperimentFolded
from frank.errors import FrankError

if TYPE_CHECKING:
    from frank.console.app import FrankApp

    _Base = FrankApp
else:
    _Base = object

ENDED = ("finished", "failed", "stopped")


class ExperimentActions(_Base):
    def follow_run(self, run_id: str | None) -> None:
        if run_id != self.followed_run:
            self.followed_run = run_id
            self.experiment_state = self.experiment_rule = self.experiment_report = None
            self._report_events = None
            self.refresh_status_now()

    def read_experiment(self) -> ExperimentFolded | None:
        """The followed run's journal folded (in the status poll's thread); on the first poll adopt a run
        whose runner is alive."""
        from frank.experiments import registry
        from frank.experiments.runner import load_state

        run_id = self.followed_run
        if run_id is None and not self._adopt_checked:
            self._adopt_checked = True
            run_id = running_experiment()
        if run_id is None:
            return None
        try:
            run = registry.load_run(run_id)
        except FrankError as exc:
            return ExperimentFolded(None, None, None, error=str(exc))
        state = load_state(run)
        report = None
        if state.status in ENDED and state.events != self._report_events:
            from frank.experiments.report import report_for_run

            try:
                report = report_for_run(run)
            except FrankError as exc:
                report = {"decision": f"no report: {exc}"}
            self._report_events = state.events
        elif state.status in ENDED:
            report = self.experiment_report
        return ExperimentFolded(state, run.design.rule, report)

    def on_experiment_folded(self, message: ExperimentFolded) -> None:
        if message.state is None:
            self.notify(f"experiment: {message.error or 'unreadable'}", severity="error")
            self.followed_run = None
            return
        if self.followed_run is None:
            self.notify(f"following the running experiment {message.state.run_id}", timeout=6)
        self.followed_run = message.state.run_id
        self.experiment_state, self.experiment_rule = message.state, message.rule
        self.experiment_report = message.report
        self.forward(message)

    def _experiments_screen(self) -> Any:
        from frank.console.screens.experiments import ExperimentsScreen

        return self.screen if isinstance(self.screen, ExperimentsScreen) else None

    def action_experiment_register(self) -> None:
        if not self.guard("register"):
            return
        screen = self._experiments_screen()
        path = screen.selected_design() if screen else None
        if path is None:
            self.notify("open the experiments screen (3) and select a design first", severity="warning")
            return
        self._preview_registration(path)

    @work(thread=True, exclusive=True, group="experiment", exit_on_error=False)
    def _preview_registration(self, path: str) -> None:
        """Draw the order now with a fresh seed and show it; registering with that seed gives this order."""
        from frank.experiments import exact
        from frank.experiments.design import load_design
        from frank.experiments.randomize import draw_order, new_seed

        design = load_design(path, check_profiles=True)
        exact.check_reachable(design, path)
        seed = new_seed()
        lines = [f"design   {design.name} ({design.kind})", f"question {design.question}", f"sha256   {design.sha256}"]
        if design.runnable:
            order = draw_order(design, seed)
            text = " ".join(f"{s.arm}" + (f"(b{s.block})" if s.block else "") for s in order.slots)
            lines.append(f"order    #{order.index} of {order.count}: {text}")
        size = exact.null_size(design)
        low = exact.smallest_p(design)
        lines.append(
            f"smallest p this design can reach: {exact.fraction(low, size) if low else '–'}"
            + (f" (alpha {design.rule.alpha:g})" if design.rule.alpha is not None else "")
        )
        # -- power from measured noise: frank/console/power_preview.py
        from frank.console.power_preview import power_lines

        lines.extend(power_lines(design))
        # --
        lines.append("Registering freezes the design and this order; it cannot be edited afterwards.")
        self.call_from_thread(
            self.confirm,
            f"Register {design.name}?",
            "\n".join(lines),
            lambda: self._register_design(path, seed),
            "Register",
        )

    @work(thread=True, exclusive=True, group="experiment", exit_on_error=False)
    def _register_design(self, path: str, seed: int) -> None:
        from frank.experiments import registry

        run = registry.register(path, seed=seed)

        def done() -> None:
            self.notify(f"registered {run.run_id} (sha256 {run.meta['design_sha256'][:12]}…)", timeout=8)
            screen = self._experiments_screen()
            if screen:
                screen.add_run(run.run_id)
            self.follow_run(run.run_id)

        self.call_from_thread(done)

    def action_experiment_run(self) -> None:
        if not self.guard("run"):
            return
        screen = self._experiments_screen()
        run_id = (screen.selected_run() if screen else None) or self.followed_run
        if run_id is None:
            self.notify("select a registered run first (experiments screen, 3)", severity="warning")
            return
        if self.engine_state in ("ready", "starting"):
            self.confirm(
                "Run the experiment?",
                "The runner starts and stops the engine for every cell: the engine "
                "running now is stopped first, with any request in flight.",
                lambda: self._launch_run(run_id, stop_first=True),
                "Run",
            )
        else:
            self._launch_run(run_id, stop_first=False)

    @work(thread=True, exclusive=True, group="experiment", exit_on_error=False)
    def _launch_run(self, run_id: str, stop_first: bool) -> None:
        from frank.experiments import job, registry

        run = registry.load_run(run_id)  # refuses an altered frozen copy before anything stops
        if stop_first:
            self.services.controller.stop()
        st = job.launch(run)

        def done() -> None:
            self.notify(f"runner started (pid {st.pid}); it survives this console. Log: {run.log_path}", timeout=8)
            self.follow_run(run_id)

        self.call_from_thread(done)

    def action_experiment_stop(self) -> None:
        if not self.guard("stop the run"):
            return
        state = self.experiment_state
        if state is None or not state.runner_pid:
            self.notify("no runner is running for the followed experiment", severity="warning")
            return
        # SIGTERM: the runner records the cell in flight as interrupted
        self.cancel_job(
            state.run_id,
            "Stop the experiment runner?",
            "The cell in flight is recorded as interrupted and redone from its engine start on resume, "
            "as the design's failure rule says.",
            "Stop run",
            f"asked the runner of {state.run_id} to stop; `r` resumes it later",
        )


def running_experiment() -> str | None:
    """The id of a registered run whose runner is alive (the console adopts it at start)."""
    from frank import jobs

    return next((j.run_id for j in jobs.list_jobs(running_only=True, of=("experiment",))), None)
