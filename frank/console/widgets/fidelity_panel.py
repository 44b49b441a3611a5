"""Fidelity on the Experiments screen: the latest run's per-set KL with its floor beside it, and a run of
`frank fidelity run` against the running engine (the CLI twin, in a thread worker, so the console stays
responsive and the run is saved exactly as the CLI saves it)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from textual import work
from textual.markup import escape

from frank import paths
from frank.console.widgets.base import Panel


def _kl(value: float | None) -> str:
    return "–" if value is None else f"{value:.2e}"


def fidelity_markup(run: dict[str, Any] | None, *, running: bool = False, error: str = "") -> str:
    """The panel's text: per set KL, floor and KL/floor of `run` (the latest saved run), plus a status line."""
    lines = []
    if running:
        lines.append("[$frank-warn]running fidelity against the engine…[/]")
    if error:
        lines.append(f"[$frank-bad]{escape(error)}[/]")
    if run is None:
        lines.append("[$frank-idle]no fidelity run yet: f measures the running engine[/]")
        return "\n".join(lines)
    knobs = " ".join(f"{k}={v}" for k, v in run.get("knobs", {}).items())
    lines.append(f"[bold]{escape(run['id'])}[/] {run['kind']}  [$frank-idle]{escape(knobs)}[/]")
    lines.append(f"{'set':<8} {'KL':>9} {'floor':>9} {'KL/floor':>9}")
    for entry in run["sets"]:
        floor = (entry.get("floor") or {}).get("value")
        ratio = entry.get("kl_over_floor")
        style = (
            "$frank-ok" if ratio is not None and ratio <= 10 else "$frank-bad" if ratio is not None else "$frank-idle"
        )
        lines.append(
            f"{escape(entry['name'][:8]):<8} [{style}]{_kl(entry['kl']):>9}[/] {_kl(floor):>9} "
            f"{'–' if ratio is None else f'{ratio:.3g}':>9}"
        )
    return "\n".join(lines)


class FidelityPanel(Panel):
    """Shows the latest fidelity run; `start_run()` measures the running engine over the shipped sets."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("fidelity (top-64 KL vs reference)", **kwargs)
        self._fidelity_busy = False
        self._fidelity_error = ""

    def on_mount(self) -> None:
        self.refresh_latest()

    @work(thread=True, exclusive=True, group="fidelity-latest", exit_on_error=False)
    def refresh_latest(self) -> None:
        from frank.fidelity.runs import list_runs

        runs = list_runs()
        self.app.call_from_thread(self._show, runs[-1] if runs else None)

    def _show(self, run: dict[str, Any] | None) -> None:
        self.set_markup(fidelity_markup(run, running=self._fidelity_busy, error=self._fidelity_error))

    def start_run(self) -> None:
        if self._fidelity_busy:
            return
        self._fidelity_busy, self._fidelity_error = True, ""
        self.refresh_latest()
        self._measure()

    @work(thread=True, exclusive=True, group="fidelity-run", exit_on_error=False)
    def _measure(self) -> None:
        proc = subprocess.run(
            [sys.executable, "-m", "frank.console.cli", "fidelity", "run", "--json"],
            capture_output=True,
            text=True,
            cwd=str(paths.REPO_ROOT),
        )
        error = ""
        if proc.returncode != 0:
            error = (
                proc.stderr.strip().splitlines()[-1].removeprefix("frank: error: ")
                if proc.stderr.strip()
                else f"exit {proc.returncode}"
            )
        else:
            json.loads(proc.stdout)  # a saved run; the refresh below reads it back
        self.app.call_from_thread(self._finished, error)

    def _finished(self, error: str) -> None:
        self._fidelity_busy, self._fidelity_error = False, error
        self.refresh_latest()
