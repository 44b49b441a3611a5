"""Episodes: the task suites, every run with its totals, and the followed run's live state
(frank.episodes.runner.load_state: task, turn, last tool call, outcome per episode). The followed run is read
once a second while it runs; otherwise every IDLE_S while the episodes screen is up, and rarely while not."""

from __future__ import annotations

import threading

from frank.console.messages import EpisodesRead
from frank.console.sources.base import Post, Source
from frank.console.state import EpisodeRunRow, EpisodesView, SuiteRow
from frank.episodes.runner import EpisodesState

FOLLOW_S = 1.0
IDLE_S = 5.0
UNWANTED_S = 30.0  # nobody looks: only a run started elsewhere is noticed, late


def suite_rows() -> tuple[SuiteRow, ...]:
    from frank.episodes.suite import builtin_suites, load_suite

    rows = []
    for name, path in builtin_suites().items():
        try:
            tasks = len(load_suite(path).tasks)
        except Exception:  # noqa: BLE001 -- a broken suite is still listed; launching it shows the error
            tasks = 0
        rows.append(SuiteRow(name, path.name, tasks))
    return tuple(rows)


class EpisodesSource(Source[EpisodesView]):
    name = "episodes"

    def __init__(self, post: Post) -> None:
        super().__init__(post)
        self._lock = threading.Lock()
        self._suites: tuple[SuiteRow, ...] | None = None
        self._follow: str | None = None
        self._runs: tuple[EpisodeRunRow, ...] = ()
        self._relist = False  # the run list is read once the screen is up, or when a run is followed

    def follow(self, run_id: str) -> None:
        with self._lock:
            self._follow = run_id
        self._relist = True
        self.poll_now()

    def message(self, view: EpisodesView) -> EpisodesRead:
        return EpisodesRead(view)

    def interval(self) -> float:
        followed = self.last.followed if self.last is not None else None
        if followed is not None and followed.status == "running":
            return FOLLOW_S
        return IDLE_S if self.wanted else UNWANTED_S

    def read(self) -> EpisodesView:
        from frank.episodes.runner import list_runs, load_state

        if self._suites is None and self.wanted:  # read once the episodes screen is up
            self._suites = suite_rows()
        last = self.last.followed if self.last is not None else None
        if not (self._relist or self.wanted) and (last is None or last.status != "running"):
            # nobody looks: only a run that started elsewhere matters (a lock check per running job)
            from frank import jobs

            if not jobs.list_jobs(running_only=True, of=("episodes",)):
                return self.last or EpisodesView(self._suites or ())
            self._relist = True
        if self._relist or self.wanted or last is None or last.status != "running":
            self._relist = False
            self._runs = tuple(
                EpisodeRunRow(r["run_id"], r["suite"], r["status"], r["done"], r["planned"], r["total_s"], r["passed"])
                for r in list_runs()
            )
        with self._lock:
            run_id = self._follow
            if run_id is None:
                running = [r for r in self._runs if r.status == "running"]
                run_id = self._follow = running[-1].run_id if running else None
        followed: EpisodesState | None = None
        if run_id is not None:
            try:
                followed = load_state(run_id)
            except (OSError, ValueError, KeyError):  # a vanished run folder ends the follow
                with self._lock:
                    self._follow = None
        return EpisodesView(self._suites or (), self._runs, followed)
