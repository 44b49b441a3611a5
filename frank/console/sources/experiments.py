"""Experiments: the designs and registered runs (read when the experiments screen is first shown and after a
registration), the followed run's
journal folded (frank.experiments.board.load_state; the report once it ended), and fidelity: the newest
saved run and the newest fidelity job. A console started while a runner is alive adopts its run."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from frank.console.messages import ExperimentsRead
from frank.console.sources.base import Post, Source
from frank.console.state import (
    DesignRow,
    ExperimentsView,
    FidelityRun,
    FidelitySet,
    FidelityView,
    FollowedExperiment,
    ReportLine,
)
from frank.errors import FrankError
from frank.experiments.registry import design_files

ENDED = ("finished", "failed", "stopped")
IDLE_S = 5.0  # the experiments screen is up, or a run is followed
UNWANTED_S = 30.0  # nobody looks and nothing is followed: only a fidelity job started elsewhere shows, late


def screen_files() -> list[Path]:
    """Shipped screens, then the user's (config dir screens/): `frank experiment screen FILE`'s files."""
    from frank import paths
    from frank.experiments import screen

    found = sorted((Path(screen.__file__).resolve().parent / "screens").glob("*.toml"))
    user = paths.config_dir() / "screens"
    if user.is_dir():
        found += sorted(user.glob("*.toml"))
    return found


def is_screen(path: str | Path) -> bool:
    return Path(path) in screen_files()


def design_rows() -> tuple[DesignRow, ...]:
    rows = []
    for path in screen_files():  # first: a campaign's first step (a screen picks, its confirmation decides)
        try:
            rows.append(screen_row(path))
        except Exception as exc:  # noqa: BLE001 -- listed with its error, never hides the others
            rows.append(DesignRow(str(path), path.stem, "error", str(exc)))
    return (*rows, *(design_row(path) for path in design_files()))


def design_row(path: Path) -> DesignRow:
    """A design as the designs table lists it; a broken one with its error, never hiding the others."""
    from frank.experiments import exact
    from frank.experiments.design import load_design

    try:
        d = load_design(path)
    except Exception as exc:  # noqa: BLE001 -- a broken design is listed with its error
        return DesignRow(str(path), path.stem, "error", str(exc))
    shape = (
        f"{d.blocks} blocks of one start per arm"
        if d.kind == "blocks"
        else f"{d.starts_per_arm}+{d.starts_per_arm} starts in one balanced order"
        if d.kind == "balanced"
        else "measures taken elsewhere (frank experiment analyze)"
    )
    arms = tuple((a.name, _arm_settings(a, d.profile)) for a in d.arms)
    return DesignRow(str(path), d.name, d.kind, d.question, arms, shape, d.measure, d.profile, exact.smallest_p(d))


def screen_row(path: Path) -> DesignRow:
    from frank.experiments.screen import load_screen

    sc = load_screen(path)
    settings = tuple((a.name, _arm_settings(a, sc.profile)) for a in sc.settings)
    shape = f"{len(sc.settings)} settings × {sc.repeats} repeats: it picks one, its confirmation decides"
    return DesignRow(str(path), sc.name, "screen", sc.question, settings, shape, sc.design.measure, sc.profile)


def _arm_settings(arm: Any, profile: str) -> str:
    """An arm's knob values, and its profile when it is not the design's (an arm on another engine)."""
    if not arm.knob_dict:
        return str(arm.profile)
    return str(arm.knob_dict) if arm.profile == profile else f"{arm.profile} {arm.knob_dict}"


def fidelity_run(run: dict[str, Any]) -> FidelityRun:
    sets = tuple(
        FidelitySet(s["name"], s.get("kl"), (s.get("floor") or {}).get("value"), s.get("kl_over_floor"))
        for s in run.get("sets", [])
    )
    knobs = tuple((str(k), str(v)) for k, v in (run.get("knobs") or {}).items())
    return FidelityRun(str(run["id"]), str(run.get("kind", "run")), knobs, sets)


def running_experiment() -> str | None:
    """The id of a registered run whose runner is alive."""
    from frank import jobs

    return next((j.run_id for j in jobs.list_jobs(running_only=True, of=("experiment",))), None)


class ExperimentsSource(Source[ExperimentsView]):
    name = "experiments"

    def __init__(self, post: Post, refresh_s: float) -> None:
        super().__init__(post)
        self.refresh_s = refresh_s
        self._lock = threading.Lock()
        self._lists: tuple[tuple[DesignRow, ...], tuple[str, ...]] | None = None
        self._follow: str | None = None
        self._adopt_checked = False
        self._report: tuple[str, int, ReportLine | None] | None = None  # (run id, events, line)
        self._fidelity_seen: tuple[Any, ...] | None = None
        self._fidelity_latest: FidelityRun | None = None

    def follow(self, run_id: str | None) -> None:
        with self._lock:
            self._follow = run_id
            self._adopt_checked = True
        self.poll_now()

    def reload(self) -> None:
        self._lists = None
        self.poll_now()

    def message(self, view: ExperimentsView) -> ExperimentsRead:
        return ExperimentsRead(view)

    def interval(self) -> float:
        view = self.last
        if view is None:
            return IDLE_S
        if (
            view.followed is None
            and not self.wanted
            and (view.fidelity.job is None or view.fidelity.job.state != "running")
        ):
            return UNWANTED_S
        busy = (
            view.followed is not None and view.followed.state is not None and view.followed.state.status == "running"
        ) or (view.fidelity.job is not None and view.fidelity.job.state == "running")
        return self.refresh_s if busy else IDLE_S

    def read(self) -> ExperimentsView:
        from frank.experiments import registry

        if self._lists is None and self.wanted:  # the designs are read once the experiments screen is up
            runs = sorted(registry.list_runs(), key=lambda m: m.get("registered_at", ""), reverse=True)
            self._lists = (design_rows(), tuple(m["run_id"] for m in runs))
        with self._lock:
            run_id = self._follow
            if run_id is None and not self._adopt_checked:
                self._adopt_checked = True
                run_id = self._follow = running_experiment()
        followed = self._fold(run_id) if run_id else None
        if followed is not None and followed.state is None:
            with self._lock:
                self._follow = None  # an unreadable run is shown once, then no longer followed
        designs, runs = self._lists or ((), ())
        return ExperimentsView(designs, runs, followed, self._fidelity())

    def _fold(self, run_id: str) -> FollowedExperiment:
        from frank.experiments import registry
        from frank.experiments.board import load_state

        try:
            run = registry.load_run(run_id)
        except FrankError as exc:
            return FollowedExperiment(run_id, error=str(exc))
        state = load_state(run)
        report = None
        if state.status in ENDED and run.meta.get("kind") != "screen":  # a screen's outcome is its pick
            cached = self._report
            if cached is not None and cached[:2] == (run_id, state.events):
                report = cached[2]
            else:
                report = self._report_line(run)
                self._report = (run_id, state.events, report)
        screen = None
        if run.meta.get("kind") == "screen":
            from frank.experiments.screen_report import result_for_run

            screen = result_for_run(run)
        return FollowedExperiment(run_id, state, run.design.rule, report, screen=screen)

    @staticmethod
    def _report_line(run: Any) -> ReportLine:
        from frank.experiments.report import report_for_run

        try:
            report = report_for_run(run)
        except FrankError as exc:
            return ReportLine(f"no report: {exc}")
        return ReportLine(report.verdict, report.p_value, report.null_size or None)

    def _fidelity(self) -> FidelityView:
        from frank import jobs
        from frank.fidelity.runs import fidelity_runs_dir, list_runs

        kind = jobs.kind("fidelity")
        dirs = jobs.run_dirs(kind)  # newest first; only the newest job's files are read
        newest = jobs.status_of(kind, dirs[0]) if dirs else None
        folder = fidelity_runs_dir()
        seen = (folder.stat().st_mtime_ns, newest)  # a new run folder changes the folder's mtime
        if seen != self._fidelity_seen:
            self._fidelity_seen = seen
            saved = [r for r in list_runs() if r.get("sets")]
            self._fidelity_latest = fidelity_run(saved[-1]) if saved else None
        return FidelityView(self._fidelity_latest, newest)
