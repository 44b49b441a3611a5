"""Episode actions: launch draws of a suite against the running engine, after a dialog that asks for the
suite and the number of draws (frank.console.screens.launch_episodes); the run is a detached job."""

from __future__ import annotations

from frank.console.actions.base import Actions


class EpisodeActions(Actions):
    def launch(self, suite: str | None = None) -> None:
        """Ask for the suite (`suite` preselected) and the draws, then launch."""
        if not self.host.guard("launching episodes"):
            return
        suites = self.host.state.episodes.suites
        if not suites:
            self.host.notify("no task suites found", severity="warning")
            return
        from frank.console.screens.launch_episodes import EpisodesLaunch, LaunchEpisodes

        engine = self.host.state.engine
        target = engine.status.url if engine.state == "ready" and engine.status is not None else None

        def chosen(choice: LaunchEpisodes | None) -> None:
            if choice is not None:
                self.start(choice.suite, choice.draws)

        self.host.push_screen(EpisodesLaunch(suites, suite, target), chosen)

    def start(self, suite: str, draws: int) -> None:
        def launch() -> tuple[str, int | None]:
            from frank.episodes import job
            from frank.episodes.runner import create_run, engine_endpoint

            url = engine_endpoint(None)  # refuses (a notification) when no engine is ready
            folder = create_run(suite, draws)
            st = job.launch(folder, url)
            return folder.name, st.pid

        def done(started: tuple[str, int | None]) -> None:
            run_id, pid = started
            self.host.notify(f"episodes {run_id} started (pid {pid}); it goes on if this console quits", timeout=6)
            self.host.follow_episodes(run_id)

        self.in_thread("episodes-launch", launch, done)
