"""What the revert watch reads from a finished run, one small adapter per run kind.

An adapter lists its finished runs (`finished`: run id and finish time) and turns one into a `RunResult`:
its arms, each with the profile and knob values it ran, its failures, its pass count, its measures and its
fidelity. A run with both the part's arm and a control arm (an experiment) is compared within itself; a
run of one arm (a replay) is compared with the latest earlier run of the same kind and `comparable` key
that ran without the part. Kinds here: experiment, replay and fidelity (`frank fidelity run`); another
kind (episode draws, say) adds its own with `register_adapter`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING, Any, Protocol

from frank import jsonl, readfile
from frank.errors import FrankError

if TYPE_CHECKING:
    from frank.fidelity.runs import FidelityRun


@dataclass(frozen=True)
class ArmResult:
    name: str
    profile: str
    knobs: dict[str, Any]
    failures: int | None = None  # failed requests, failed starts, failed episodes
    passed: int | None = None  # units that passed (requests ok, episodes graded pass)
    total: int | None = None
    measures: dict[str, float] = field(default_factory=dict)
    fidelity: float | None = None  # KL against the reference (lower is closer)
    knobs_changed: bool = False  # a knob was flipped while it ran: its knobs are not one setting


@dataclass(frozen=True)
class RunResult:
    kind: str
    run_id: str
    finished_at: float
    arms: tuple[ArmResult, ...]
    comparable: str = ""  # runs with the same key can stand in as each other's control
    label: str = ""


@dataclass(frozen=True)
class RunRef:
    run_id: str
    finished_at: float


class RunAdapter(Protocol):
    kind: str

    def finished(self) -> Iterable[RunRef]: ...

    def load(self, run_id: str) -> RunResult: ...


ADAPTERS: dict[str, RunAdapter] = {}


def register_adapter(adapter: RunAdapter) -> None:
    ADAPTERS[adapter.kind] = adapter


def _mean_measures(items: list[dict[str, Any]]) -> dict[str, float]:
    keys = {k for m in items for k, v in m.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    out = {}
    for k in keys:
        values = [m[k] for m in items if isinstance(m.get(k), (int, float))]
        if values:
            out[k] = mean(values)
    return out


class ExperimentAdapter:
    """Registered experiments: each arm's starts (knobs as the engine reported them at ready), failed
    requests plus failed starts, requests ok / requests, the mean of every measure over its starts."""

    kind = "experiment"

    def finished(self) -> Iterable[RunRef]:
        from frank.experiments import registry
        from frank.experiments.journal import read_events

        for meta in registry.list_runs():
            if not (meta.get("order") or {}).get("slots"):
                continue  # external designs: nothing runs here
            try:
                events = read_events(registry.experiments_dir() / meta["run_id"] / "journal.jsonl")
            except (OSError, FrankError, ValueError):
                continue
            stops = [e for e in events if e.get("event") == "runner_stopped"]
            if stops and stops[-1].get("reason") == "finished":
                yield RunRef(meta["run_id"], float(stops[-1].get("unix") or 0.0))

    def load(self, run_id: str) -> RunResult:
        from frank.engine.profiles import ProfileError, load_profile
        from frank.experiments import registry
        from frank.experiments.journal import read_events

        run = registry.load_run(run_id)
        events = read_events(run.journal_path)
        arms = []
        for arm in run.design.arms:
            ready = [e for e in events if e.get("event") == "engine_ready" and run.slots[e["slot"]].arm == arm.name]
            if ready:
                knobs = dict(ready[0].get("knobs") or {})
            else:
                try:
                    knobs = load_profile(arm.profile).resolve_knobs(arm.knob_dict)
                except ProfileError:
                    knobs = arm.knob_dict
            done = [e for e in events if e.get("event") == "cell_done" and e.get("arm") == arm.name]
            failed_starts = sum(1 for e in events if e.get("event") == "cell_failed" and e.get("arm") == arm.name)
            failed_requests = sum(int(e.get("failed") or 0) for e in done)
            ok = sum(int(e.get("requests") or 0) for e in done)
            measures = _mean_measures([dict(e.get("measures") or {}) for e in done])
            arms.append(
                ArmResult(
                    name=arm.name,
                    profile=arm.profile,
                    knobs=knobs,
                    failures=failed_requests + failed_starts,
                    passed=ok,
                    total=ok + failed_requests,
                    measures=measures,
                    fidelity=cells_fidelity(done),
                )
            )
        stops = [e for e in events if e.get("event") == "runner_stopped"]
        return RunResult(
            kind=self.kind,
            run_id=run.run_id,
            finished_at=float(stops[-1].get("unix") or 0.0) if stops else 0.0,
            arms=tuple(arms),
            comparable=run.design.sha256,
            label=run.design.name,
        )


def cells_fidelity(done: list[dict[str, Any]]) -> float | None:
    """Mean KL over an arm's starts and sets, from cells that measured fidelity (a design with [fidelity]:
    the cell's result holds {"fidelity": {"sets": {SET: {"kl": ...}}}})."""
    kls = [
        float(v["kl"])
        for e in done
        for v in ((e.get("fidelity") or {}).get("sets") or {}).values()
        if isinstance(v, dict) and isinstance(v.get("kl"), (int, float))
    ]
    return mean(kls) if kls else None


class FidelityAdapter:
    """`frank fidelity run` results (frank/fidelity/runs.py): one arm, the engine's profile and the knobs
    that change numerics, fidelity = the mean KL over the run's sets. Runs of the same sets (by content hash)
    and model are comparable. Floor runs (two starts of one configuration) are not checks of a part."""

    kind = "fidelity"

    def _runs(self) -> list[FidelityRun]:
        from frank.fidelity.runs import list_runs

        return [r for r in list_runs() if r.get("kind") == "run"]

    def finished(self) -> Iterable[RunRef]:
        for run in self._runs():
            yield RunRef(run["id"], float(run.get("created_at") or 0.0) + float(run.get("seconds") or 0.0))

    def load(self, run_id: str) -> RunResult:
        from frank.fidelity.runs import load_run

        run = load_run(run_id)
        sets = run.get("sets") or []
        kls = [float(s["kl"]) for s in sets if isinstance(s.get("kl"), (int, float))]
        arm = ArmResult(
            name=f"engine {run.get('profile')}",
            profile=str(run.get("profile") or ""),
            knobs=dict(run.get("knobs") or {}),
            fidelity=mean(kls) if kls else None,
        )
        key = json.dumps(
            {
                "model": run.get("model_sha256"),
                "sets": sorted(s.get("set_sha256") or "" for s in sets),
                "k": run.get("top_k"),
            },
            sort_keys=True,
        )
        return RunResult(
            kind=self.kind,
            run_id=run["id"],
            label=run.get("label") or "",
            finished_at=float(run.get("created_at") or 0.0) + float(run.get("seconds") or 0.0),
            arms=(arm,),
            comparable=key,
        )


class ReplayAdapter:
    """Replays against the running engine: one arm, the engine's profile and knobs as recorded at the start
    (run.json `engine`), requests ok / requests, the experiment measures taken from its records."""

    kind = "replay"

    def finished(self) -> Iterable[RunRef]:
        from frank.workloads.catalog import list_runs

        for summary in list_runs():
            if summary.get("state") == "finished":
                yield RunRef(summary["run_id"], float(summary.get("updated_at") or 0.0))

    def load(self, run_id: str) -> RunResult:
        from frank.workloads.record import start_measures, tallies_of
        from frank.workloads.replay import RUN_FILE, SUMMARY_FILE, read_records, resolve_run_dir

        folder = resolve_run_dir(run_id)
        meta, summary = readfile.read_object(folder / RUN_FILE), readfile.read_object(folder / SUMMARY_FILE)
        engine = meta.get("engine") or {}
        records = {d: read_records(folder / f"{d}.jsonl") for d in meta.get("draws", [])}
        m = start_measures(tallies_of(records)).to_json()
        totals = summary.get("totals") or {}
        measures = {
            k: v
            for k, v in m.items()
            if k in ("time_per_verify_step", "front_end_per_draw", "total_replay_time", "tokens_per_s")
            and v is not None
        }
        started, ended = float(meta.get("created_at") or 0.0), float(summary.get("updated_at") or 0.0)
        arm = ArmResult(
            name=f"engine {engine.get('profile', '?')}",
            profile=str(engine.get("profile") or ""),
            knobs=dict(engine.get("knobs") or {}),
            failures=int(totals.get("failed") or 0),
            passed=int(totals.get("ok", totals.get("requests", 0) - totals.get("failed", 0))),
            total=int(totals.get("requests") or 0),
            measures=measures,
            knobs_changed=_knobs_flipped(engine.get("profile"), started, ended),
        )
        options = meta.get("options") or {}
        key = json.dumps(
            {
                "workload": (meta.get("workload") or {}).get("manifest_sha256"),
                "draws": meta.get("draws"),
                **{k: options.get(k) for k in ("mode", "limit", "max_tokens")},
            },
            sort_keys=True,
        )
        return RunResult(
            kind=self.kind,
            run_id=folder.name,
            finished_at=ended,
            arms=(arm,) if engine else (),
            comparable=key,
            label=(meta.get("workload") or {}).get("name", ""),
        )


def _knobs_flipped(profile: str | None, start: float, end: float) -> bool:
    from frank.engine.controller import EngineController

    path: Path = EngineController().files.knob_changes
    if not profile or not path.is_file():
        return False
    return any(
        change.get("profile") == profile and start <= float(change.get("at") or 0) <= end for change in jsonl.read(path)
    )


register_adapter(ExperimentAdapter())
register_adapter(ReplayAdapter())
register_adapter(FidelityAdapter())
