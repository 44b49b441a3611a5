"""Job actions: launch a replay (always detached: it survives the console and an SSH drop), follow a job,
cancel it (asks first). The jobs source (frank.console.sources.jobs) reads them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frank.console.actions.base import Actions
from frank.errors import FrankError

if TYPE_CHECKING:
    from frank.workloads.replay import ReplayOptions


class JobActions(Actions):
    def replay_launch(self) -> None:
        if not self.host.guard("replay"):
            return
        from frank.console.screens.replays import ReplaysScreen

        screen = self.host.screen if isinstance(self.host.screen, ReplaysScreen) else None
        if screen is None:
            self.host.switch_mode("replays")
            self.host.notify("pick a workload, then enter or L", timeout=4)
            return
        state = self.host.state
        if state.engine.state != "ready":
            self.host.notify("the engine is not ready: start it first (s)", severity="warning")
            return
        busy = next((j for j in state.jobs.running if j.kind == "replay"), None)
        if busy is not None:
            self.host.notify(
                f"replay {busy.run_id} is running (one request at a time on the engine): cancel it first (C)",
                severity="warning",
            )
            return
        name = screen.selected_workload()
        if name is None:
            self.host.notify("no workload selected", severity="warning")
            return
        try:
            options = screen.options()
        except (ValueError, FrankError) as exc:
            self.host.notify(f"replay options: {exc}", severity="error")
            return
        status = state.engine.status
        url, profile = status.url, status.profile  # (ready: both set)
        key = self.host.services.controller.client_api_key
        self.in_thread("replay", lambda: self._launch(name, options, url, profile, key), self._launched)

    @staticmethod
    def _launch(
        name: str, options: ReplayOptions, url: str | None, profile: str | None, client_api_key: str | None
    ) -> tuple[str, int | None]:
        from frank.engine.profiles import load_profile
        from frank.workloads import replay_job

        api_key = client_api_key  # the running engine's (llama.cpp: its token)
        try:
            api_key = api_key or load_profile(profile).api_key or None
        except FrankError:
            pass
        run_dir = replay_job.prepare(name, options, url)  # a built-in W01 is generated here on first use
        st = replay_job.launch(run_dir, api_key)
        return st.run_id, st.pid

    def _launched(self, launched: tuple[str, int | None]) -> None:
        run_id, pid = launched
        self.host.notify(f"replay {run_id} started (pid {pid}); it goes on if this console quits", timeout=6)
        self.host.follow_job(run_id)
        self.host.reload_jobs()

    def replay_cancel(self) -> None:
        job = self.host.state.jobs.followed
        if job is None or not job.running:
            self.host.notify("no job is running", severity="warning")
            return
        if job.status is not None and job.status.kind == "replay":
            body = (
                f"{job.run_id} stops after the request in flight; every finished request is kept and the "
                "run can be resumed (frank replay --resume)."
            )
            asked = f"asked {job.run_id} to stop; resume it with `frank replay --resume {job.run_id}`"
        else:
            body, asked = (
                f"{job.run_id} stops after the work in flight; what finished is kept.",
                f"asked {job.run_id} to stop",
            )
        self.cancel(job.run_id, "Cancel the job?", body, "Cancel job", asked)

    def cancel(self, run_id: str, title: str, body: str, yes: str, asked: str) -> None:
        """Ask first; then SIGTERM the job (frank.jobs.cancel): it stops cleanly and can be resumed."""

        def cancel() -> None:
            from frank import jobs

            try:
                jobs.cancel(run_id)
                self.host.notify(asked)
            except FrankError as exc:
                self.host.notify(str(exc), severity="warning")
            self.host.reload_jobs()

        self.host.confirm(title, body, cancel, yes)
