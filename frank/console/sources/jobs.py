"""Jobs (frank.jobs): the jobs of every kind, the workloads a replay can launch, and the followed job's status
and newest records. Running jobs are listed every JOBS_IDLE_S (a lock check per run); the whole list and the
workloads are read only while the replays screen is up (`wanted`), again when the running set changed or
someone asked; the followed job is polled once a second while it runs. A console started while a job runs
adopts the newest running one (experiments have their own source)."""

from __future__ import annotations

import threading
import time
from typing import Any

from frank.console.messages import JobsRead
from frank.console.sources.base import Post, Source
from frank.console.state import FollowedJob, JobRecord, JobsView, WorkloadRow
from frank.jobs import JobStatus
from frank.workloads.record import ReplayRecord, knob_flips

JOBS_IDLE_S = 5.0
FOLLOW_S = 1.0
REQUEST_ROWS = 200  # the followed job's newest records kept; older ones stay in its run folder


def workload_rows() -> tuple[WorkloadRow, ...]:
    """(name, draws x requests, source) from the one catalog."""
    from frank.workloads.catalog import list_workloads

    rows = []
    for e in list_workloads():
        shape = f"{e.draws} × {e.requests // e.draws}" if e.draws and e.requests else "–"
        if e.error:
            rows.append(WorkloadRow(e.name, "–", f"error: {e.error}"[:60]))
        elif e.source == "builtin":
            rows.append(WorkloadRow(e.name, shape, "synthetic W01" + ("" if e.generated else " (made on first use)")))
        else:
            rows.append(WorkloadRow(e.name, shape, "recording"))
    return tuple(rows)


def job_row(r: ReplayRecord, previous: ReplayRecord | None = None) -> JobRecord:
    """A replay's request record as the screens show it; `previous`: the draw's record before it (a live
    knob's flip is between the two, or within this one)."""
    server = r.server.values if r.server is not None else None
    return JobRecord(
        draw=r.draw,
        id=str(r.id),
        status=r.status,
        ttft_s=server.ttft_s if server else None,
        queue_s=server.queue_s if server else None,
        prefill_s=server.prefill_s if server else None,
        front_end_s=server.front_end_s if server else None,
        prompt_tokens=r.prompt_tokens if isinstance(r.prompt_tokens, int) else None,
        timed=server is not None,
        live_knobs=tuple((k, str(v)) for k, v in (r.live_knobs_end or r.live_knobs or {}).items()),
        flips=knob_flips(previous, r),
    )


class JobsSource(Source[JobsView]):
    name = "jobs"

    def __init__(self, post: Post) -> None:
        super().__init__(post)
        self._lock = threading.Lock()
        self._follow: str | None = None  # asked for by the console (a launch, `o`)
        self._adopted = False
        self._follower: Any = None  # frank.jobs.Follower of the followed run
        self._followed: FollowedJob | None = None
        self._listed_at = -1e9
        self._running_ids: frozenset[str] | None = None
        self._relist = True
        self._all: tuple[JobStatus, ...] = ()
        self._workloads: tuple[WorkloadRow, ...] | None = None
        self._previous: dict[str, ReplayRecord] = {}  # the followed run's last record of each draw

    def follow(self, run_id: str) -> None:
        with self._lock:
            if self._followed is not None and self._followed.run_id == run_id:
                return
            self._follow = run_id
        self.poll_now()

    def reload(self) -> None:
        """Read the whole list (and the workloads) again on the next read, now."""
        self._relist = True
        self._workloads = None
        self.poll_now()

    def message(self, view: JobsView) -> JobsRead:
        return JobsRead(view)

    def want(self, wanted: bool) -> None:
        if wanted and not self.wanted:
            self._relist = True
        super().want(wanted)

    def interval(self) -> float:
        followed = self._followed
        return FOLLOW_S if followed is not None and followed.running else JOBS_IDLE_S

    def read(self) -> JobsView:
        from frank import jobs

        if self._workloads is None and self.wanted:
            self._workloads = workload_rows()
        now = time.monotonic()
        if now - self._listed_at >= JOBS_IDLE_S or self._relist:
            self._listed_at = now
            running = jobs.list_jobs(running_only=True)
            ids = frozenset(j.run_id for j in running)
            if not self.wanted:  # nobody looks at the whole list: the running jobs are all that is needed
                self._all, self._relist = tuple(running), True
            elif self._relist or ids != self._running_ids:  # a job started or ended: its row changes
                self._relist = False
                self._running_ids = ids
                self._all = tuple(sorted(jobs.list_jobs(), key=lambda j: (j.state != "running", j.run_id)))
            else:  # the same jobs run: their rows get their progress
                fresh = {j.run_id: j for j in running}
                self._all = tuple(fresh.get(j.run_id, j) for j in self._all)
            if self._followed is None and self._follow is None:
                adopt = next((j for j in running if j.kind not in ("experiment",)), None)
                if adopt is not None:
                    self._follow, self._adopted = adopt.run_id, True
        self._poll_followed()
        followed = self._followed
        if followed is not None and followed.status is not None:  # its row says what its own status says
            own = followed.status
            listed = any(j.run_id == own.run_id for j in self._all)
            self._all = tuple(own if j.run_id == own.run_id else j for j in self._all) if listed else self._all
        return JobsView(self._all, self._workloads or (), self._followed)

    def _poll_followed(self) -> None:
        from frank import jobs

        with self._lock:
            asked, self._follow = self._follow, None
        if asked is not None:
            self._follower = jobs.Follower(asked)
            self._followed = FollowedJob(asked, adopted=self._adopted)
            self._adopted = False
            self._previous = {}
        if self._follower is None or self._followed is None:
            return
        old = self._followed
        status, records = self._follower.poll()
        rows = []
        for x in records:
            if "draw" not in x or "status" not in x:
                continue  # another kind's journal line
            rec = ReplayRecord.from_json(x)
            rows.append(job_row(rec, self._previous.get(rec.draw)))
            self._previous[rec.draw] = rec
        if status == old.status and not rows:
            return
        self._followed = FollowedJob(
            old.run_id, status, (*old.records, *rows)[-REQUEST_ROWS:], old.received + len(rows), old.adopted
        )
