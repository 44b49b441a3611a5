"""Experiment actions: register a design (its drawn order, hash and smallest p shown before confirming), run
or resume a registered run detached, stop it; and fidelity: measure the running engine as a job (f), or
cancel the fidelity job that runs (f again). The experiments source reads the runs and fidelity."""

from __future__ import annotations

from typing import Any

from frank.console.actions.base import Actions
from frank.console.actions.jobs import JobActions
from frank.console.host import Host
from frank.engine.records import RUNNING_STATES


class ExperimentActions(Actions):
    def __init__(self, host: Host, jobs: JobActions) -> None:
        super().__init__(host)
        self.jobs = jobs

    def _screen(self) -> Any:
        """The experiments screen when it is up (its selection names the design or run)."""
        from frank.console.screens.experiments import ExperimentsScreen

        return self.host.screen if isinstance(self.host.screen, ExperimentsScreen) else None

    def register(self) -> None:
        if not self.host.guard("register"):
            return
        screen = self._screen()
        path = screen.selected_design() if screen else None
        if path is None:
            self.host.notify("open the experiments screen (3) and select a design first", severity="warning")
            return
        self.in_thread("experiment", lambda: preview_registration(path), self._ask_to_register)

    def _ask_to_register(self, preview: tuple[str, str, str, int]) -> None:
        path, name, text, seed = preview
        self.host.confirm(
            f"Register {name}?",
            text,
            lambda: self.in_thread("experiment", lambda: _register(path, seed), self._registered),
            "Register",
        )

    # -- reports (the CLI's `experiment report` and `experiment screen --report [--design-out]`) ----------
    def _followed(self) -> str | None:
        screen = self._screen()
        followed = self.host.state.experiments.followed
        run_id = (screen.selected_run() if screen else None) or (followed.run_id if followed else None)
        if run_id is None:
            self.host.notify("select a registered run first (experiments screen, 3)", severity="warning")
        return run_id

    def report(self) -> None:
        """The followed run's report as the CLI prints it: a design's decision, or a screen's pick."""
        run_id = self._followed()
        if run_id is not None:
            self.in_thread("report", lambda: (run_id, report_text(run_id)), self._show_report)

    def _show_report(self, shown: tuple[str, str]) -> None:
        from frank.console.screens.text import TextScreen

        run_id, text = shown
        self.host.push_screen(TextScreen(f"report of {run_id}", text))

    def screen_design(self) -> None:
        """Write the followed screen run's confirmation design into the user's designs (it is listed next to
        the shipped ones, ready to register: g)."""
        if not self.host.guard("write the confirmation design"):
            return
        run_id = self._followed()
        if run_id is not None:
            self.in_thread("screen", lambda: write_confirmation(run_id), self._wrote)

    def _wrote(self, path: str) -> None:
        self.host.notify(f"wrote {path}: listed with the designs, g registers it", timeout=10)
        self.host.reload_experiments()

    def _registered(self, registered: tuple[str, str]) -> None:
        run_id, sha = registered
        self.host.notify(f"registered {run_id} (sha256 {sha[:12]}…)", timeout=8)
        self.host.reload_experiments()
        self.host.follow_run(run_id)
        screen = self._screen()
        if screen is not None:
            screen.select_run(run_id)

    def run(self) -> None:
        if not self.host.guard("run"):
            return
        screen = self._screen()
        followed = self.host.state.experiments.followed
        run_id = (screen.selected_run() if screen else None) or (followed.run_id if followed else None)
        if run_id is None:
            self.host.notify("select a registered run first (experiments screen, 3)", severity="warning")
            return
        if self.host.state.engine.state in RUNNING_STATES:
            self.host.confirm(
                "Run the experiment?",
                "The runner starts and stops the engine for every cell: the engine "
                "running now is stopped first, with any request in flight.",
                lambda: self._launch(run_id, stop_first=True),
                "Run",
            )
        else:
            self._launch(run_id, stop_first=False)

    def _launch(self, run_id: str, stop_first: bool) -> None:
        controller = self.host.services.controller

        def launch() -> tuple[int | None, str]:
            from frank.experiments import job, registry

            run = registry.load_run(run_id)  # refuses an altered frozen copy before anything stops
            if stop_first:
                controller.stop()
            st = job.launch(run)
            return st.pid, str(run.log_path)

        def done(started: tuple[int | None, str]) -> None:
            pid, log = started
            self.host.notify(f"runner started (pid {pid}); it survives this console. Log: {log}", timeout=8)
            self.host.follow_run(run_id)

        self.in_thread("experiment", launch, done)

    def stop(self) -> None:
        if not self.host.guard("stop the run"):
            return
        followed = self.host.state.experiments.followed
        state = followed.state if followed is not None else None
        if state is None or not state.runner_pid:
            self.host.notify("no runner is running for the followed experiment", severity="warning")
            return
        # SIGTERM: the runner records the cell in flight as interrupted
        self.jobs.cancel(
            state.run_id,
            "Stop the experiment runner?",
            "The cell in flight is recorded as interrupted and redone from its engine start on resume, "
            "as the design's failure rule says.",
            "Stop run",
            f"asked the runner of {state.run_id} to stop; `r` resumes it later",
        )

    # -- fidelity -------------------------------------------------------------------------------------------
    def fidelity(self) -> None:
        """Measure the running engine as a fidelity job, or (while one runs) cancel it after asking."""
        if not self.host.guard("fidelity"):
            return
        job = self.host.state.experiments.fidelity.job
        if job is not None and job.state == "running":
            self.jobs.cancel(
                job.run_id,
                "Cancel the fidelity run?",
                f"{job.run_id} stops now; nothing of it is saved (a fidelity run is saved whole or not at all).",
                "Cancel run",
                f"asked fidelity {job.run_id} to stop",
            )
            return
        if self.host.state.engine.state != "ready":
            self.host.notify("fidelity needs a running engine: start it first (s)", severity="warning")
            return

        def launch() -> tuple[str, int | None]:
            from frank.fidelity import job as fidelity_job

            st = fidelity_job.launch(fidelity_job.prepare())
            return st.run_id, st.pid

        def done(started: tuple[str, int | None]) -> None:
            run_id, pid = started
            self.host.notify(f"fidelity {run_id} started (pid {pid}); `frank jobs list` shows it", timeout=6)
            self.host.reload_experiments()

        self.in_thread("fidelity", launch, done)


def report_text(run_id: str) -> str:
    from frank.experiments import registry

    run = registry.load_run(run_id, verify=False)
    if run.meta.get("kind") == "screen":
        from frank.experiments import screen_report

        return screen_report.format_record(screen_report.record_for_run(run))
    from frank.experiments.report import report_for_run
    from frank.experiments.report_text import format_report

    return format_report(report_for_run(run))


def write_confirmation(run_id: str) -> str:
    """`frank experiment screen --report RUN --design-out F` with F in the user's designs folder."""
    from frank import paths
    from frank.errors import FrankError
    from frank.experiments import registry, screen_report

    run = registry.load_run(run_id, verify=False)
    if run.meta.get("kind") != "screen":
        raise FrankError(f"{run_id} is not a screen run: only a screen's pick has a confirmation design")
    rec = screen_report.record_for_run(run)
    if not rec.confirmation:
        raise FrankError(f"{run_id}: no pick ({rec.result.pick_reason}): no confirmation design")
    out = paths.config_dir() / "designs" / f"{run.design.name}-confirm.toml"
    out.parent.mkdir(parents=True, exist_ok=True)
    paths.write_private(out, rec.confirmation.design_toml)
    return str(out)


def preview_registration(path: str) -> tuple[str, str, str, int]:
    """Draw the order now with a fresh seed and describe it; registering with that seed gives this order."""
    from frank.console.power_preview import power_lines
    from frank.console.sources.experiments import is_screen
    from frank.experiments import exact
    from frank.experiments.design import load_design
    from frank.experiments.randomize import draw_order, new_seed

    if is_screen(path):
        return preview_screen(path)
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
    lines.extend(power_lines(design))
    lines.append("Registering freezes the design and this order; it cannot be edited afterwards.")
    return path, design.name, "\n".join(lines), seed


def preview_screen(path: str) -> tuple[str, str, str, int]:
    """A screen's drawn order (its runnable form: one arm a setting, one block a repeat), as registering it
    with that seed freezes it (`frank experiment screen FILE --register-only`)."""
    from frank.experiments.randomize import draw_order, new_seed
    from frank.experiments.screen import load_screen

    screen = load_screen(path, check_profiles=True)
    seed = new_seed()
    order = draw_order(screen.design, seed)
    text = " ".join(f"{s.arm}(r{s.block})" if s.block else s.arm for s in order.slots)
    lines = [
        f"screen   {screen.name}: {len(screen.settings)} settings × {screen.repeats} repeats",
        f"question {screen.question}",
        f"sha256   {screen.sha256}",
        f"order    #{order.index} of {order.count}: {text}",
        "A screen picks one setting; it is never evidence: its confirmation design (from its report) is.",
        "Registering freezes the screen and this order; r runs it.",
    ]
    return path, screen.name, "\n".join(lines), seed


def _register(path: str, seed: int) -> tuple[str, str]:
    from frank.campaign.actions import part_of_design
    from frank.console.sources.experiments import is_screen
    from frank.experiments import registry

    if is_screen(path):
        run = registry.register_screen(path, seed=seed)
    else:
        run = registry.register(path, seed=seed, part=part_of_design(path))
    return run.run_id, run.meta["design_sha256"]
