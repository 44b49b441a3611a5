"""One cell on the real engine: a fresh start with the arm's knobs, the replay, the stop, the measures.

The arm's knobs are applied on top of the profile's defaults (never the operator's saved knob values),
so a cell's engine is set by the frozen design alone. The replay goes through replays.runner into the
run folder's cells/slotNN-attemptK/replay/, and the measures are taken from its per-request records:

- time_per_verify_step: engine.measures.records_time_per_verify_step: sum of decode time / sum of decode
                        steps (every target-model pass after the first token, drafted or not)
- front_end_per_draw:   sum of front-end time (engine.measures.front_end_s, per request) per draw, mean
                        over the start's draws
- total_replay_time:    sum of client time, send to last byte
- tokens_per_s:         output tokens / client time

The first `warmup_requests` of each draw are replayed but not measured. A measured request whose server
values could not be attributed to it makes the attempt fail (the failure rule applies) rather than be
guessed.
"""
from __future__ import annotations

import hashlib
import signal
from pathlib import Path
from typing import Any

from engine import measures
from engine.controller import EngineController, EngineError
from engine.errors import FrankError
from engine.profiles import load_profile
from replays.experiments.design import Design
from replays.experiments.randomize import Slot
from replays.experiments.registry import Run, RunError
from replays.experiments.runner import Attempt, CellError, Note


def resolve_workload(design: Design, source_path: str | None) -> Path:
    """A workload folder: a path (relative to the design file's folder at registration), a built-in name
    (w01-mini, w01-full: generated on first use) or a name in the user's workloads dir."""
    from replays.workload import resolve_workload as resolve_spec

    assert design.workload is not None
    name = design.workload.name
    if source_path and not Path(name).is_absolute():
        beside = Path(source_path).parent / name
        if (beside / "workload.toml").is_file():
            return beside.resolve()
    try:
        path = resolve_spec(name)
    except FrankError as exc:
        raise RunError(f"workload.name: {exc}") from None
    if not (path / "workload.toml").is_file():
        raise RunError(f"workload.name: {path} is not a workload folder (no workload.toml)")
    return path.resolve()


def check_draws(design: Design, path: Path) -> None:
    """The design's draws exist in the workload (checked before any engine start)."""
    from replays.workload import read_manifest

    assert design.workload is not None
    names = read_manifest(path).draw_names
    for i, draw in enumerate(design.workload.draws):
        if str(draw) not in names:
            raise RunError(f"workload.draws[{i}]: {path} has no draw named {str(draw)!r} (draws: {', '.join(names)})")


def manifest_sha256(path: Path) -> str:
    return hashlib.sha256((path / "workload.toml").read_bytes()).hexdigest()


def measures_from_records(records_by_draw: dict[str, list[dict[str, Any]]], warmup: int) -> dict[str, Any]:
    """Per-start measures from the replay's latest record of each request."""
    client = out_tokens = 0.0
    servers: list[dict[str, Any]] = []
    front_by_draw: dict[str, float] = {}
    measured = failed = unattributed = 0
    hashes: dict[str, str | None] = {}
    for draw, records in records_by_draw.items():
        latest: dict[str, dict[str, Any]] = {}
        for rec in records:
            latest[rec["id"]] = rec
        front_by_draw[draw] = 0.0
        for rec in sorted(latest.values(), key=lambda r: r.get("index", 0)):
            hashes[f"{draw}/{rec['id']}"] = rec.get("prompt_ids_sha256")
            if rec.get("status") != "ok":
                failed += 1
                continue
            if rec.get("index", 0) < warmup:
                continue
            measured += 1
            server = rec.get("server") or {}
            if not server.get("attributed"):
                unattributed += 1
                continue
            front_by_draw[draw] += server.get("front_end_s") or 0.0
            servers.append(server)
            client += (rec.get("client") or {}).get("total_s") or 0.0
            out_tokens += rec.get("completion_tokens") or 0
    fronts = list(front_by_draw.values())
    decode, steps = measures.verify_step_totals(servers)
    return {
        "time_per_verify_step": measures.time_per_verify_step(decode, steps),
        "front_end_per_draw": sum(fronts) / len(fronts) if fronts else None,
        "total_replay_time": client,
        "tokens_per_s": out_tokens / client if client else None,
        "decode_steps": steps, "decode_s": decode, "front_end_by_draw": front_by_draw,
        "measured_requests": measured, "failed": failed, "unattributed": unattributed,
        "prompt_hashes": hashes,
    }


class EngineCellExecutor:
    """Cells on the real engine, through the one EngineController of this user's state dir."""

    def __init__(self, controller: EngineController | None = None) -> None:
        self.controller = controller or EngineController()

    def precheck(self, run: Run) -> None:
        st = self.controller.status()
        if st.state in ("starting", "ready"):
            raise RunError(f"an engine is running (profile {st.profile}, pid {st.pid}); an experiment needs a "
                           f"fresh start per cell: stop it first (frank engine stop)")
        self._workload(run)

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
        path = Path(record["path"]) if record.get("path") and Path(record["path"]).is_dir() \
            else resolve_workload(run.design, run.meta.get("source_path"))
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

    def execute(self, run: Run, slot: Slot, attempt: int, note: Note) -> dict[str, Any]:
        from replays.runner import ReplayOptions, read_records, start_replay

        design = run.design
        assert design.workload is not None
        arm = design.arm(slot.arm)
        knobs = load_profile(arm.profile).resolve_knobs(arm.knob_dict)   # defaults + the arm's values
        workload = self._workload(run)
        try:
            st = self.controller.start(arm.profile, knobs)
        except EngineError as exc:
            self._stop_engine()
            raise CellError(f"the engine did not start: {exc}") from None
        except BaseException:          # stopped (SIGTERM) while starting: leave no engine behind
            self._stop_engine()
            raise
        note("engine_ready", slot=slot.slot, attempt=attempt, pid=st.pid, url=st.url, ready_s=st.ready_s,
             started_at=st.started_at, knobs=st.knobs)
        replay_dir = run.cell_dir(slot.slot, attempt) / "replay"
        try:
            options = ReplayOptions(mode=design.workload.mode,
                                    draws=tuple(str(d) for d in design.workload.draws) or None,
                                    limit=design.workload.requests, max_tokens=design.workload.max_tokens,
                                    token_ids=True)
            runner = start_replay(workload, st.url or "", options, out=replay_dir)
            summary = runner.run_sync()
            records = {d: read_records(runner.draw_file(d)) for d in runner.draw_names}
            m = measures_from_records(records, design.workload.warmup_requests)
            note("replay_done", slot=slot.slot, attempt=attempt, state=summary.get("state"),
                 requests=sum(len(r) for r in records.values()), failed=m["failed"],
                 unattributed=m["unattributed"], dir=str(replay_dir))
            fidelity = None
            if design.fidelity is not None and summary.get("state") == "finished":
                from replays.experiments.fidelity import measure_cell

                fidelity = measure_cell(design.fidelity, run.cell_dir(slot.slot, attempt), self.controller)
                note("fidelity_done", slot=slot.slot, attempt=attempt,
                     kl={name: v["kl"] for name, v in fidelity["sets"].items()})
        except FrankError as exc:
            raise CellError(f"the replay failed: {exc}") from None
        finally:
            self._stop_engine()
            note("engine_stopped", slot=slot.slot, attempt=attempt)
        if summary.get("state") != "finished":
            raise CellError(f"the replay ended {summary.get('state')}: {summary.get('error')}")
        if m["unattributed"]:
            raise CellError(f"{m['unattributed']} measured request(s) had server values that could not be "
                            f"attributed to them")
        value = m[design.measure]
        if value is None:
            raise CellError(f"no {design.measure} could be measured (no verify steps or no requests?)")
        return {"value": value, "measure": design.measure, "failed": m["failed"],
                "requests": m["measured_requests"], "prompt_hashes": m["prompt_hashes"],
                "measures": {k: m[k] for k in ("time_per_verify_step", "front_end_per_draw", "total_replay_time",
                                               "tokens_per_s", "decode_steps", "decode_s", "front_end_by_draw")},
                "dir": str(replay_dir), **({"fidelity": fidelity} if fidelity is not None else {})}
