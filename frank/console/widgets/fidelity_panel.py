"""Fidelity on the Experiments screen: the newest saved run's per-set KL with its floor beside it, and the
newest fidelity job (f launches `frank fidelity run` as a job; the experiments source reads both)."""

from __future__ import annotations

from typing import Any

from textual.markup import escape

from frank.console.state import FidelityRun, FidelityView
from frank.console.widgets.base import Panel


def _kl(value: float | None) -> str:
    return "–" if value is None else f"{value:.2e}"


def job_line(view: FidelityView) -> str:
    job = view.job
    if job is None:
        return ""
    if job.state == "running":
        detail = escape(job.detail or "starting")
        return f"[$frank-warn]fidelity job {escape(job.run_id)} running: {detail}  (f cancels)[/]"
    if job.state in ("failed", "interrupted"):
        return f"[$frank-bad]fidelity job {escape(job.run_id)} {job.state}: {escape(job.detail)}[/]"
    if job.state == "cancelled":
        return f"[$frank-idle]fidelity job {escape(job.run_id)} cancelled[/]"
    return ""


def fidelity_markup(run: FidelityRun | None, status: str = "") -> str:
    """The panel's text: a status line, then per set KL, floor and KL/floor of `run` (the newest saved run)."""
    lines = [status] if status else []
    if run is None:
        lines.append("[$frank-idle]no fidelity run yet: f measures the running engine[/]")
        return "\n".join(lines)
    knobs = " ".join(f"{k}={v}" for k, v in run.knobs)
    lines.append(f"[bold]{escape(run.id)}[/] {run.kind}  [$frank-idle]{escape(knobs)}[/]")
    lines.append(f"{'set':<8} {'KL':>9} {'floor':>9} {'KL/floor':>9}")
    for entry in run.sets:
        ratio = entry.kl_over_floor
        style = (
            "$frank-ok" if ratio is not None and ratio <= 10 else "$frank-bad" if ratio is not None else "$frank-idle"
        )
        lines.append(
            f"{escape(entry.name[:8]):<8} [{style}]{_kl(entry.kl):>9}[/] {_kl(entry.floor):>9} "
            f"{'–' if ratio is None else f'{ratio:.3g}':>9}"
        )
    return "\n".join(lines)


class FidelityPanel(Panel):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("fidelity (top-64 KL vs reference)", **kwargs)

    def show(self, view: FidelityView) -> None:
        self.set_markup(fidelity_markup(view.latest, job_line(view)))
