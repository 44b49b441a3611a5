"""The kinds a job can be, given to frank.jobs by its callers: the console (FrankApp) and the CLI's commands
that list, follow or cancel runs of any kind call `install()` first.

frank.jobs names no kind (it sits below them all); the imports here are the real dependency, which
import-linter sees. A job process needs none of this: its module hands its own KIND to frank.jobs.
Importing this module costs what the four kinds import (scipy, through the experiments), so headless
commands that need no job kind never import it.
"""

from __future__ import annotations

from frank import jobs
from frank.episodes import job as episodes_job
from frank.experiments import job as experiment_job
from frank.fidelity import job as fidelity_job
from frank.workloads import replay_job

KINDS = (replay_job.KIND, experiment_job.KIND, episodes_job.KIND, fidelity_job.KIND)  # the order `find` tries


def install() -> None:
    """Register the four kinds with frank.jobs (idempotent)."""
    jobs.register(*KINDS)
