"""Blocks over hosts: a design with `hosts = ["a", "b"]` has each block's cells run on one host of the fleet
(frank.fleet.fleetfile), blocks dealt to the hosts in drawn order, through Ray.

Each cell is a Ray task that asks for its host's node resource (so it runs there) and runs
frank.experiments.cell's EngineCellExecutor in that node's worker, with the node's own FRANK_HOME and
engine (the environment `ray start` was given). The hosts run side by side, a cell each at a time: this is
a runner.Lanes executor, a host a lane (`start` submits a task, `wait` is `ray.wait` over the tasks in
flight). The journal stays here, on the coordinator: the tasks send their events (engine_ready,
replay_done, ...) back through one Ray queue that lives on this node, and each is journaled, fsynced, when
the runner next waits, with its host. The runner adds the host to its own cell events through `place`.

A host lost mid-cell (its node dies, or its worker) fails that attempt, so the design's failure rule voids
it and retries it or voids the block; a cell whose host is not in the Ray cluster is not begun: the runner
starts no new cell, lets the other hosts' cells in flight finish, and stops; `frank experiment run RUN`
resumes once the host is back. Ray is imported only here, when a
design has hosts: `import frank` and the CLI's start stay free of it.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from frank.errors import FrankError
from frank.experiments.errors import RunError
from frank.experiments.journal import Attempt
from frank.experiments.randomize import Slot, hosts_by_slot
from frank.experiments.registry import Run
from frank.experiments.runner import CellError, CellExecutor, Ended, Flight, Lanes, Note
from frank.fleet.fleetfile import Fleet, Host, load_fleet

if TYPE_CHECKING:
    from ray.util.queue import Queue

NAMESPACE = "frank"
POLL_S = 0.5  # how often the coordinator journals what the task has sent
CANCEL_WAIT_S = 60.0  # a cancelled cell's time to stop its engine
ALIVE_EVERY_S = 5.0  # how often a waiting cell's host is looked up in the cluster
SETTLE_S = 30.0  # after a lost cell: how long the cluster may take to declare its node dead


def executor_for(run: Run) -> CellExecutor | Lanes:
    """The cell executor of `run`: on this machine's engine, or on the fleet's hosts when the design has hosts."""
    from frank.experiments.cell import EngineCellExecutor

    if not run.design.hosts:
        return EngineCellExecutor()
    return RayCellExecutor(run, load_fleet())


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RunError("this design has hosts: Ray is needed (`make setup` installs frank's `fleet` extra)") from None
    return ray


class RayCellExecutor:
    """Cells on the fleet's hosts through Ray (see the module docstring)."""

    def __init__(self, run: Run, fleet: Fleet) -> None:
        self.fleet = fleet
        self.hosts: dict[str, Host] = {}
        for name in run.design.hosts:
            try:
                self.hosts[name] = fleet.host(name)
            except FrankError as exc:
                raise RunError(f"design hosts: {exc}") from None
        self.by_slot = hosts_by_slot(run.design.hosts, run.slots)
        self._queue: Queue | None = None

    # -- Ray --------------------------------------------------------------------------------------------

    def _connect(self) -> Any:
        ray = _ray()
        if not ray.is_initialized():
            try:
                ray.init(
                    address=self.fleet.ray_address or None,
                    namespace=NAMESPACE,
                    logging_level="ERROR",
                    log_to_driver=False,
                )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = self.fleet.ray_address or "RAY_ADDRESS / the local head"
                raise RunError(f"no Ray cluster at {where}: {exc}") from None
        return ray

    def _alive(self, host: Host) -> bool:
        ray = self._connect()
        return any(n["Alive"] and n["Resources"].get(host.resource, 0) > 0 for n in ray.nodes())

    def _settle(self, host: Host) -> None:
        """After a cell was lost: wait (up to SETTLE_S) until the cluster has declared the host's node dead,
        so the next slot's `place` sees the host as gone rather than sending it a task it cannot run. A
        host that stays alive (its worker alone died) is used again."""
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline and self._alive(host):
            time.sleep(POLL_S)

    def _events(self) -> Queue:
        """The queue the cells send their events through, on this (the coordinator's) node."""
        if self._queue is None:
            ray = self._connect()
            from ray.util.queue import Queue
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
            self._queue = Queue(actor_options={"num_cpus": 0, "scheduling_strategy": here})
        return self._queue

    # -- the runner's calls -----------------------------------------------------------------------------

    def precheck(self, run: Run) -> None:
        missing = [f"{h.name} ({h.resource})" for h in self.hosts.values() if not self._alive(h)]
        if missing:
            raise RunError(
                f"host(s) not in the Ray cluster: {', '.join(missing)}; start each with "
                f"`ray start --address HEAD --resources '{{\"RESOURCE\": 1}}'` (docs/fleet.md)"
            )

    def place(self, run: Run, slot: Slot) -> dict[str, Any]:
        """The fields the runner adds to this slot's events; refuses (RunError: the runner stops, nothing
        counted against the slot) when its host is not in the cluster."""
        host = self.hosts[self.by_slot[slot.slot]]
        if not self._alive(host):
            raise RunError(
                f"host {host.name} ({host.resource}) is not in the Ray cluster: start {slot.slot + 1} waits for "
                f"it; resume with `frank experiment run {run.run_id}` once it is back"
            )
        return {"host": host.name}

    def cleanup(self, run: Run, attempt: Attempt) -> str:
        name = attempt.started.get("host") or self.by_slot.get(attempt.slot)
        host = self.hosts.get(str(name))
        if host is None or not self._alive(host):
            return f"host {name} is not in the Ray cluster: its cell's engine is stopped when it next runs a cell"
        ray = self._connect()
        task = ray.remote(_cleanup_on_host).options(resources={host.resource: 1}, num_cpus=0, max_retries=0)
        return f"host {name}: {ray.get(task.remote(run.run_id))}"

    def lane(self, slot: Slot) -> str:
        return self.by_slot[slot.slot]

    def start(self, run: Run, slot: Slot, attempt: int) -> Any:
        ray = self._connect()
        host = self.hosts[self.by_slot[slot.slot]]
        task = ray.remote(_cell_on_host).options(
            resources={host.resource: 1}, num_cpus=0, max_retries=0, retry_exceptions=False
        )
        return task.remote(run, slot, attempt, host.name, self._events())

    def _journal_sent(self, note: Note) -> None:
        """Journal what the cells in flight have sent (each event carries its host)."""
        queue = self._events()
        for event, fields in queue.get_nowait_batch(queue.qsize()):
            note(event, **fields)

    def wait(self, run: Run, flights: list[Flight], note: Note) -> list[tuple[Flight, Ended]]:
        ray = self._connect()
        by_ref = {f.handle: f for f in flights}
        checked = time.monotonic()
        while True:
            ready, _ = ray.wait(list(by_ref), num_returns=len(by_ref), timeout=POLL_S)
            self._journal_sent(note)  # a cell's events are all sent before its task returns
            if ready:
                return [(by_ref[ref], self._ended(ref, self.hosts[by_ref[ref].lane])) for ref in ready]
            if time.monotonic() - checked >= ALIVE_EVERY_S:  # a task of a dead node's resource waits forever
                checked = time.monotonic()
                lost = [f for f in flights if not self._alive(self.hosts[f.lane])]
                for f in lost:
                    ray.cancel(f.handle, force=True)
                void = "left the Ray cluster mid-cell: the attempt is void"
                if lost:
                    return [(f, CellError(f"host {f.lane} {void}")) for f in lost]

    def _ended(self, ref: Any, host: Host) -> Ended:
        """A finished task's `cell_done` fields, or why its attempt did not finish."""
        ray = self._connect()
        try:
            outcome: dict[str, Any] = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, CellError):
                return CellError(f"host {host.name}: {cause}")
            if isinstance(cause, FrankError):
                return RunError(f"host {host.name}: {cause}")
            return CellError(f"host {host.name}: the cell raised {type(cause).__name__}: {cause}")
        except ray.exceptions.RayError as exc:
            self._settle(host)
            return CellError(f"host {host.name} was lost mid-cell ({type(exc).__name__}): the attempt is void")
        return outcome

    def cancel(self, run: Run, flights: list[Flight], note: Note) -> None:
        """Stop the flights: each cell unwinds (stopping its engine) within CANCEL_WAIT_S; one that does not
        is recorded interrupted all the same, and its engine is stopped by the next cell of the run there."""
        ray = self._connect()
        pending = [f.handle for f in flights]
        for ref in pending:
            ray.cancel(ref)
        deadline = time.monotonic() + CANCEL_WAIT_S
        while pending and time.monotonic() < deadline:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_S)
        self._journal_sent(note)


# -- on the host (in its Ray worker, with its FRANK_HOME) ------------------------------------------------


def _stop_leftover(run_id: str) -> str:
    """Stop the engine a cut-off cell of this run left on this host (the activity file names the run)."""
    from frank.engine.controller import EngineController
    from frank.telemetry.activity import clear_activity, read_activity

    if read_activity().get("experiment") != run_id:
        return "nothing of this run was left running"
    controller = EngineController()
    st = controller.status(check_health=False)
    clear_activity()
    if st.state == "stopped":
        return "no engine was left running"
    controller.stop()
    return f"stopped the cut-off cell's engine (pid {st.pid}, {st.state})"


def _cleanup_on_host(run_id: str) -> str:
    return _stop_leftover(run_id)


def _cell_on_host(run: Run, slot: Slot, attempt: int, host: str, queue: Queue) -> dict[str, Any]:
    """One attempt on this host: the run's cells are kept in this host's own data dir."""
    from frank import paths
    from frank.experiments.cell import EngineCellExecutor
    from frank.experiments.registry import experiments_dir
    from frank.telemetry.activity import clear_activity, write_activity

    _stop_leftover(run.run_id)
    here = replace(run, folder=paths.private_dir(experiments_dir() / run.run_id))
    executor = EngineCellExecutor()
    st = executor.controller.status()
    if st.state in ("starting", "ready"):
        raise RunError(
            f"an engine is running (profile {st.profile}, pid {st.pid}) that no cell of this run started; "
            f"a placed cell needs a fresh start: stop it on {host} (frank engine stop)"
        )

    def note(event: str, **fields: Any) -> dict[str, Any]:
        queue.put((event, {**fields, "host": host}))
        return {"event": event, **fields}

    write_activity(experiment=run.run_id, arm=slot.arm, part=str(run.meta.get("part") or ""), host=host)
    outcome = executor.execute(here, slot, attempt, note)
    clear_activity()  # kept when the cell is cut off: the next cell here stops what it left
    return outcome
