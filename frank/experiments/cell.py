"""One cell on the real engine: a fresh start with the arm's knobs, the replay, the stop, the measures.

The arm's knobs are applied on top of the profile's defaults (never the operator's saved knob values),
so a cell's engine is set by the frozen design alone. The replay goes through frank.workloads.replay into the
run folder's cells/slotNN-attemptK/replay/, and the measures are taken from its per-request records:

- time_per_verify_step: frank.engine.measures.time_per_verify_step over the start: sum of decode time / sum of decode
                        steps (every target-model pass after the first token, drafted or not)
- front_end_per_draw:   sum of front-end time (frank.engine.measures.front_end_s, per request) per draw, mean
                        over the start's draws
- total_replay_time:    sum of client time, send to last byte
- tokens_per_s:         output tokens / client time

With `[measure] aggregate = "median"` the start's value is the median of its measured requests' step times
(frank.workloads.record.median_step_s) instead of decode seconds / decode steps.

The first `warmup_requests` of each draw are replayed but not measured. A measured request whose server
values could not be attributed to it makes the attempt fail (the failure rule applies) rather than be
guessed.

While the replay runs, a rig recorder (frank.telemetry.rig_recorder) samples the machine beside the engine:
the rig's fixed facts and the conditions of the replay (GPU clocks, temperature, power, throttle reasons,
PCIe link; the CPU's clock, steal time, the other processes' CPU) go into the cell's `rig`.

A design with [episodes] instead of [workload] runs graded agent episodes in the cell (frank.episodes:
the suite's draws into cells/slotNN-attemptK/episodes/), measured by frank.episodes.runner
.episode_measures: episode_total_time (client seconds summed over the start's episodes) and
episodes_passed. An episode the engine failed (error) counts as a failed request for the guards.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frank import paths, readfile
from frank.engine.controller import EngineController, EngineError
from frank.engine.profiles import load_profile
from frank.engine.records import RUNNING_STATES
from frank.errors import FrankError, WriteError
from frank.experiments.design import MEDIANS
from frank.experiments.errors import RunError
from frank.experiments.journal import Attempt, CellResult
from frank.experiments.randomize import Slot
from frank.experiments.registry import Run
from frank.experiments.runner import CellError, Note
from frank.experiments.workloads import check_draws, manifest_sha256, resolve_workload

if TYPE_CHECKING:
    from frank.experiments.fidelity import CellFidelity
from frank.workloads.record import DrawTally, StartMeasures, start_measures
from frank.workloads.replay import ReplayRunner, read_records


def replay_measures(runner: ReplayRunner, warmup: int) -> StartMeasures:
    """Per-start measures from the replay's latest record of each request (frank.workloads.record)."""
    tallies = {
        d: DrawTally(d, [r.id for r in runner.planned(d)], warmup).add_all(read_records(runner.draw_file(d)))
        for d in runner.draw_names
    }
    return start_measures(tallies)


def disk_full(folder: Path, room: int = 1 << 20) -> str:
    """Why a folder's file system cannot take the next records ("" when it has `room` bytes free)."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return ""
    return f"{folder}: {os.strerror(errno.ENOSPC)} ({free} bytes free)" if free < room else ""


def failure_messages(runner: ReplayRunner, most: int = 3) -> list[str]:
    """The engine's own words for the first failed requests (each request's latest record), so a report
    shows why a request failed, not only that it did."""
    out: list[str] = []
    for draw in runner.draw_names:
        latest = {r["id"]: r for r in read_records(runner.draw_file(draw))}
        for r in latest.values():
            if r.get("status") == "failed" and len(out) < most:
                status = f"HTTP {r['http_status']}: " if r.get("http_status") else ""
                out.append(f"{r['id']}: {status}{str(r.get('error') or 'failed')[:300]}")
    return out


class EngineCellExecutor:
    """Cells on the real engine, through the one EngineController of this user's state dir."""

    def __init__(self, controller: EngineController | None = None) -> None:
        self.controller = controller or EngineController()

    def precheck(self, run: Run) -> None:
        st = self.controller.status()
        if st.state in RUNNING_STATES:
            raise RunError(
                f"an engine is running (profile {st.profile}, pid {st.pid}); an experiment needs a "
                f"fresh start per cell: stop it first (frank engine stop)"
            )
        if run.design.episodes is not None:
            self._suite(run)
        else:
            self._workload(run)

    def _suite(self, run: Run) -> Path:
        from frank.episodes.suite import load_suite

        assert run.design.episodes is not None
        record = run.meta.get("workload") or {}
        try:
            suite = load_suite(record.get("suite") or run.design.episodes.suite)
        except FrankError as exc:
            raise RunError(f"episodes.suite: {exc}") from None
        source = readfile.read_bytes(suite.path, readfile.TOML, RunError)
        if record.get("suite_sha256") and hashlib.sha256(source).hexdigest() != record["suite_sha256"]:
            raise RunError(f"suite {suite.path} changed since registration (manifest hash mismatch)")
        return suite.path

    def cleanup(self, run: Run, attempt: Attempt) -> str:
        st = self.controller.status(check_health=False)
        if st.state == "stopped":
            return "no engine was left running"
        started = attempt.started.get("unix") or 0
        if st.started_at is not None and st.started_at >= started - 1.0:
            self.controller.stop()
            return f"stopped the cut-off cell's engine (pid {st.pid}, {st.state})"
        return f"left alone an engine started before the cut-off cell (pid {st.pid}, {st.state})"

    def _workload(self, run: Run) -> Path:
        record = run.meta.get("workload") or {}
        path = (
            Path(record["path"])
            if record.get("path") and Path(record["path"]).is_dir()
            else resolve_workload(run.design, run.meta.get("source_path"))
        )
        recorded = record.get("manifest_sha256")
        if recorded and manifest_sha256(path) != recorded:
            raise RunError(f"workload {path} changed since registration (manifest hash mismatch)")
        check_draws(run.design, path)
        return path

    def _stop_engine(self) -> None:
        """Stop the engine with SIGTERM/SIGINT held back, so a stop request cannot cut the stop short; a
        held signal is delivered (and unwinds the runner) right after."""
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        try:
            self.controller.stop()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def execute(self, run: Run, slot: Slot, attempt: int, note: Note) -> CellResult:
        from frank.telemetry.rig_recorder import RigRecorder
        from frank.workloads.replay import ReplayOptions, start_replay

        design = run.design
        arm = design.arm(slot.arm)
        knobs = load_profile(arm.profile).resolve_knobs(arm.knob_dict)  # defaults + the arm's values
        if design.episodes is not None:
            return self._execute_episodes(run, slot, attempt, note, arm.profile, knobs)
        assert design.workload is not None
        workload = self._workload(run)
        st = self._start(arm.profile, knobs, slot, attempt, note)
        replay_dir = run.cell_dir(slot.slot, attempt) / "replay"
        rig: dict[str, Any] | None = None
        try:
            options = ReplayOptions(
                mode=design.workload.mode,
                draws=tuple(str(d) for d in design.workload.draws) or None,
                limit=design.workload.requests,
                max_tokens=design.workload.max_tokens,
                output_tokens=design.workload.output_tokens,
                token_ids=True,
                api_key=self.controller.client_api_key,  # llama.cpp's /v1 wants its key (vLLM's: none)
            )
            runner = start_replay(workload, st.url or "", options, out=replay_dir)
            recorder = RigRecorder(st.pid).start()
            try:
                summary = runner.run_sync()
            finally:
                facts, conditions = recorder.stop()
            if facts is not None and conditions is not None:
                rig = {"facts": facts.to_json(), "conditions": conditions.to_json()}
            measured = replay_measures(runner, design.workload.warmup_requests)
            m = measured.to_json()  # by the design's measure name
            note(
                "replay_done",
                slot=slot.slot,
                attempt=attempt,
                state=summary.state,
                requests=summary.totals.requests,
                failed=m["failed"],
                unattributed=m["unattributed"],
                dir=str(replay_dir),
            )
            fidelity = self._fidelity(run, slot, attempt, note) if summary.state == "finished" else None
        except WriteError:
            raise  # a full disk is the machine's, not the arm's: the run stops (resumable), no retry burnt now
        except FrankError as exc:
            raise CellError(f"the replay failed: {exc}") from None
        finally:
            self._stop_engine()
            note("engine_stopped", slot=slot.slot, attempt=attempt)
        if summary.state != "finished":
            raise CellError(f"the replay ended {summary.state}: {summary.error}")
        if m["unattributed"]:
            raise CellError(
                f"{m['unattributed']} measured request(s) had server values that could not be attributed to them"
            )
        median = design.measure_aggregate == "median"
        value = m[MEDIANS[design.measure]] if median else m[design.measure]
        if value is None:
            raise CellError(
                f"no {design.measure} could be measured"
                + (
                    " as the median of steps (a measured request's steps could not be told apart on the client)"
                    if median
                    else " (no verify steps or no requests?)"
                )
            )
        return CellResult(
            value=value,
            measure=design.measure,
            failed=measured.failed,
            requests=measured.measured_requests,
            prompt_hashes=measured.prompt_hashes,
            output_hashes=measured.output_hashes,
            failures=tuple(failure_messages(runner)) if measured.failed else (),
            measures={
                k: m[k]
                for k in (
                    "time_per_verify_step",
                    "time_per_verify_step_median",
                    "front_end_per_draw",
                    "total_replay_time",
                    "client_time_per_draw",
                    "tokens_per_s",
                    "cpu_expert_wait_per_step",
                    "decode_steps",
                    "decode_s",
                    "front_end_by_draw",
                )
            },
            dir=str(replay_dir),
            fidelity=fidelity,
            rig=rig,
        )

    def _start(self, profile: str, knobs: dict[str, Any], slot: Slot, attempt: int, note: Note):
        try:
            st = self.controller.start(profile, knobs)
        except EngineError as exc:
            self._stop_engine()
            full = disk_full(paths.state_dir())
            if full:  # the supervisor could not write its state files: the machine's fault, not the arm's
                raise WriteError(f"{full}; the engine could not start ({exc})") from None
            raise CellError(f"the engine did not start: {exc}") from None
        except BaseException:  # stopped (SIGTERM) while starting: leave no engine behind
            self._stop_engine()
            raise
        note(
            "engine_ready",
            slot=slot.slot,
            attempt=attempt,
            pid=st.pid,
            url=st.url,
            ready_s=st.ready_s,
            started_at=st.started_at,
            knobs=st.knobs,
        )
        return st

    def _fidelity(self, run: Run, slot: Slot, attempt: int, note: Note) -> CellFidelity | None:
        """The fidelity rule's measure, while the arm's engine is still up (after its replay or episodes). An
        engine that cannot be measured (an engine kind without the log-probabilities it needs, say) gives
        no KL, with the reason: never a made-up one."""
        if run.design.fidelity is None:
            return None
        from frank.experiments.fidelity import measure_cell

        try:
            fidelity = measure_cell(run.design.fidelity, run.cell_dir(slot.slot, attempt), self.controller)
        except FrankError as exc:  # the start's measures stay; the rule reports this start's KL as missing
            note("fidelity_unavailable", slot=slot.slot, attempt=attempt, reason=str(exc))
            return {"sets": {}, "unavailable": str(exc)}
        note(
            "fidelity_done", slot=slot.slot, attempt=attempt, kl={name: v["kl"] for name, v in fidelity["sets"].items()}
        )
        return fidelity

    def _execute_episodes(
        self, run: Run, slot: Slot, attempt: int, note: Note, profile: str, knobs: dict[str, Any]
    ) -> CellResult:
        """The cell's episodes: the suite's draws on a fresh engine with the arm's knobs, each draw in a fresh
        prompt cache, then fidelity. vLLM keys its prefix cache on the request's `cache_salt` (fresh per
        draw); llama.cpp has no such namespace (a slot's KV and its RAM prompt cache serve every request),
        so its engine is started afresh for every draw after the first."""
        from frank.engine.kinds import kind_of
        from frank.episodes.runner import (
            create_run,
            draw_totals,
            episode_measures,
            read_jsonl,
            run_episodes,
        )
        from frank.episodes.tasks import load_secret

        design = run.design
        assert design.episodes is not None
        suite = self._suite(run)
        folder = run.cell_dir(slot.slot, attempt) / "episodes"
        restart = kind_of(load_profile(profile)).fresh_cache == "restart"
        st = self._start(profile, knobs, slot, attempt, note)
        served = False  # whether a draw has run on this engine start

        def fresh_draw(draw: int) -> tuple[str, str]:
            nonlocal st, served
            if restart and served:
                self._stop_engine()
                note("engine_stopped", slot=slot.slot, attempt=attempt, reason=f"a fresh prompt cache for draw {draw}")
                st = self._start(profile, knobs, slot, attempt, note)
            served = True
            return st.url or "", "fresh engine start" if restart else "cache_salt"

        try:
            # one secret for the whole experiment: every cell's draw k has the same workspaces and hidden cases
            secret = load_secret(run.folder / "episodes.secret")
            create_run(suite, design.episodes.draws, out=folder, secret=secret)
            outcome = run_episodes(folder, st.url, fresh_draw=fresh_draw)
            results = read_jsonl(folder / "results.jsonl")
            m = episode_measures(results)
            namespaces = {r["draw"]: r.get("cache_namespace") for r in results}
            draws = [d | {"cache_namespace": namespaces.get(d["draw"])} for d in draw_totals(results)]
            note(
                "episodes_done",
                slot=slot.slot,
                attempt=attempt,
                status=outcome.status,
                episodes=len(results),
                passed=m["episodes_passed"],
                errors=m["episode_errors"],
                draws=draws,
                dir=str(folder),
            )
            fidelity = self._fidelity(run, slot, attempt, note) if outcome.status == "finished" else None
        except FrankError as exc:
            raise CellError(f"the episodes failed: {exc}") from None
        finally:
            self._stop_engine()
            note("engine_stopped", slot=slot.slot, attempt=attempt)
        if outcome.status != "finished":
            raise CellError(f"the episodes ended {outcome.status}: {outcome.reason}")
        return CellResult(
            value=m[design.measure],
            measure=design.measure,
            failed=int(m["episode_errors"]),
            requests=int(m["requests"]),
            prompt_hashes={},
            measures={**m, "draws": draws},
            dir=str(folder),
            fidelity=fidelity,
        )
