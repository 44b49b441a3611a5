"""Job actions: launch a replay (always detached: it survives the console and an SSH drop), follow any
running job live, cancel it (asks first).

One thread worker polls the jobs (frank.jobs) and re-arms itself: once a second while the followed job
runs, every JOBS_IDLE_S otherwise. It posts JobsListed and JobProgressed; a console started while a job runs
adopts the newest running one.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from textual import work

from frank.console.messages import JobProgressed, JobsListed
from frank.console.services import FollowedJob
from frank.errors import FrankError

if TYPE_CHECKING:
    from frank.console.app import FrankApp

    _Base = FrankApp
else:
    _Base = object

JOBS_IDLE_S = 5.0  # poll the list of running jobs this often while no followed job runs
FOLLOW_S = 1.0  # and the followed job this often while it runs


class JobActions(_Base):
    # -- launch ----------------------------------------------------------------------------------------
    def action_replay_launch(self) -> None:
        if not self.guard("replay"):
            return
        from frank.console.screens.replays import ReplaysScreen

        screen = self.screen if isinstance(self.screen, ReplaysScreen) else None
        if screen is None:
            self.switch_mode("replays")
            self.notify("pick a workload, then enter or L", timeout=4)
            return
        if self.engine_state != "ready":
            self.notify("the engine is not ready: start it first (s)", severity="warning")
            return
        busy = next((j for j in self.running_jobs if j.kind == "replay"), None)
        if busy is not None or (self.job is not None and self.job.running and self.job.status.kind == "replay"):
            run_id = busy.run_id if busy is not None else self.job.run_id
            self.notify(
                f"replay {run_id} is running (one request at a time on the engine): cancel it first (C)",
                severity="warning",
            )
            return
        name = screen.selected_workload()
        if name is None:
            self.notify("no workload selected", severity="warning")
            return
        try:
            options = screen.options()
        except ValueError as exc:
            self.notify(f"replay options: {exc}", severity="error")
            return
        self._launch_replay(name, options)

    @work(thread=True, exclusive=True, group="replay", exit_on_error=False)
    def _launch_replay(self, name: str, options: dict[str, Any]) -> None:
        from frank.engine.profiles import load_profile
        from frank.workloads import replay_job
        from frank.workloads.replay import ReplayOptions

        status = self.engine_status
        api_key = self.services.controller.client_api_key  # the running engine's (llama.cpp: its token)
        try:
            api_key = api_key or load_profile(status.profile).api_key or None
        except FrankError:
            pass
        opts = ReplayOptions(mode=options["mode"], draws=options["draws"], limit=options["limit"])
        run_dir = replay_job.prepare(name, opts, status.url)  # a built-in W01 is generated here on first use
        st = replay_job.launch(run_dir, api_key)
        self.call_from_thread(self._job_launched, st.run_id, st.pid)

    def _job_launched(self, run_id: str, pid: int | None) -> None:
        self.notify(f"replay {run_id} started (pid {pid}); it goes on if this console quits", timeout=6)
        self.follow_job(run_id)

    # -- follow ----------------------------------------------------------------------------------------
    def follow_job(self, run_id: str) -> None:
        """Follow `run_id` from its first record (the screens rebuild their view of it)."""
        if self.job is not None and self.job.run_id == run_id:
            return
        self.job = FollowedJob(run_id)
        self._follower = None  # (the replays screen starts its view afresh when it sees another run id)
        self.refresh_jobs_now()

    def refresh_jobs_now(self) -> None:
        if self._jobs_timer is not None:
            self._jobs_timer.stop()
        self.poll_jobs()

    @work(thread=True, exclusive=True, group="jobs", exit_on_error=False)
    def poll_jobs(self) -> None:
        from frank import jobs

        now = time.monotonic()
        if now - self._jobs_listed_at >= JOBS_IDLE_S:
            self._jobs_listed_at = now
            running = jobs.list_jobs(running_only=True)
            self.post_message(JobsListed(running))
            adopt = next((j for j in running if j.kind != "experiment"), None)
            if self.job is None and adopt is not None:
                self.call_from_thread(self._adopt_job, adopt.run_id, adopt.kind)
                return
        job = self.job
        if job is None:
            return
        follower = self._follower
        if follower is None or follower.run_id != job.run_id:
            follower = self._follower = jobs.Follower(job.run_id)
        status, records = follower.poll()
        self.post_message(JobProgressed(status, records))

    def _adopt_job(self, run_id: str, kind: str) -> None:
        if self.job is None:
            self.notify(f"following the running {kind} {run_id}", timeout=6)
            self.follow_job(run_id)

    def _rearm_jobs(self) -> None:
        if self.is_running and self.poll_status:
            running = self.job is not None and self.job.running
            self._jobs_timer = self.set_timer(FOLLOW_S if running else JOBS_IDLE_S, self.poll_jobs)

    def on_jobs_listed(self, message: JobsListed) -> None:
        self.running_jobs = message.running
        self.forward(message)

    def on_job_progressed(self, message: JobProgressed) -> None:
        job = self.job
        if job is None or job.run_id != message.status.run_id:
            return
        was_running = job.running
        job.update(message.status, message.records)
        if was_running and not job.running:
            self.notify(
                f"{job.status.kind} {job.run_id}: {job.status.state} ({job.status.done}/{job.status.planned or '?'})",
                timeout=8,
            )
        self.forward(message)

    # -- cancel ----------------------------------------------------------------------------------------
    def action_replay_cancel(self) -> None:
        job = self.job
        if job is None or not job.running:
            self.notify("no job is running", severity="warning")
            return
        self.cancel_job(
            job.run_id,
            "Cancel the job?",
            f"{job.run_id} stops after the request in flight; every finished request is kept and the "
            "run can be resumed (frank replay --resume).",
            "Cancel job",
            f"asked {job.run_id} to stop; resume it with `frank replay --resume {job.run_id}`",
        )

    def cancel_job(self, run_id: str, title: str, body: str, yes: str, asked: str) -> None:
        """Ask first; then SIGTERM the job (frank.jobs.cancel): it stops cleanly and can be resumed."""

        def cancel() -> None:
            from frank import jobs

            try:
                jobs.cancel(run_id)
                self.notify(asked)
            except FrankError as exc:
                self.notify(str(exc), severity="warning")
            self.refresh_jobs_now()

        self.confirm(title, body, cancel, yes)
