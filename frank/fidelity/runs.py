"""Fidelity runs: the measure over text sets against a running engine, the noise floors, and saved runs.

- `run_fidelity`: each set's reference (cached) against the running engine -> per set `kl`, `positions`,
  `misses`, `reference_sha256`, and the floors where known. Saved as a run.
- `floor_run`: starts the same configuration twice (the engine floor: KL of start 2 against start 1's own
  top k) and measures each start against the reference. Saved as a run of kind "floor".
- The reference floor: the reference against its twin (another CPU thread count, so another reduction
  order) with the twin's log-probabilities rounded to float32, as an engine reports them.
- A set's floor is the larger of the two where both are known: differences below it are noise.

Runs are private JSON files in `<runs>/fidelity/<run id>/run.json`.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

import httpx
import numpy as np

from frank import paths, readfile
from frank.engine.profiles import KnobValue, load_profile
from frank.engine.records import RUNNING_STATES
from frank.errors import FrankError
from frank.fidelity.candidate import Candidate, engine_logprobs, top_k_arrays
from frank.fidelity.measure import TOP_K, dense_candidate, mean_kl
from frank.fidelity.reference import FLOOR_THREADS, Reference, get_reference, model_fingerprint
from frank.fidelity.sets import DEFAULT_SETS, TextSet, load_set, resolve_set

Progress = Callable[[str], None]
REQUEST_TIMEOUT_S = 600.0


class Floor(TypedDict):
    reference: float  # the reference against its twin (frank.fidelity.reference)
    engine: float | None  # start against start of this configuration, where measured
    engine_run: str | None
    value: float  # the larger of the two: differences below it are noise


class Versus(TypedDict, total=False):
    """A floor run's third start, with some knob values changed."""

    knobs: dict[str, Any]
    kl: float  # against start 1's top k, as the engine floor
    kl_reference: float
    over_engine_floor: float | None


class SetEntry(TypedDict, total=False):
    """One text set of a fidelity run (run.json's `sets`, read back by later runs: the keys stay)."""

    name: str
    kl: float
    positions: int
    misses: int
    max_kl: float
    documents: int
    set_sha256: str
    reference_sha256: str
    floor: Floor
    kl_over_floor: float | None
    kl_start_2: float  # a floor run's: its second start against the reference
    engine_floor: float
    versus: Versus


class FidelityRun(TypedDict, total=False):
    """A saved fidelity run (`<runs>/fidelity/<id>/run.json`)."""

    id: str
    kind: str  # "run" | "floor"
    created_at: float
    profile: str
    knobs: dict[str, KnobValue]
    model_sha256: str | None
    top_k: int
    sets: list[SetEntry]
    label: str
    seconds: float
    path: str


@dataclass(frozen=True)
class Target:
    """The engine a run measures, and where its reference comes from (None: measured without a reference
    model, frank.fidelity.control)."""

    url: str
    served_model: str
    model_dir: Path | None
    python: Path | None  # the engine venv's python: it runs the reference
    profile: str
    knobs: dict[str, Any]
    api_key: str = ""
    kind: str = "vllm"  # the engine kind: how its log-probabilities are asked for (frank.fidelity.candidate)

    @property
    def numeric_knobs(self) -> dict[str, KnobValue]:
        """The knobs that need a restart: live ones (the region cache) cannot change the numerics."""
        prof = load_profile(self.profile)
        return {k: v for k, v in sorted(self.knobs.items()) if k not in prof.knobs or prof.knobs[k].needs_restart}


def reference_source(prof) -> tuple[Path, Path]:
    """(Hugging Face checkpoint folder, python with torch and transformers) of a profile's reference. A vLLM
    profile serves the checkpoint itself from its own venv. A llama.cpp profile serves a GGUF: its reference
    is the float32 checkpoint derived from that GGUF, in the same folder (`frank model build`), run in the
    engine venv (the llama.cpp venv has no torch). An exllamav3 profile serves a folder of EXL3 weights
    quantized from the checkpoint in the folder above it (scripts/device_exl3.sh writes them there)."""
    model = Path(prof.model_path())
    if prof.kind == "vllm":
        return model, prof.python_path()
    folder = model.parent if model.suffix == ".gguf" or prof.kind == "exl3" else model
    if not (folder / "config.json").is_file():
        raise FrankError(
            f"fidelity on {prof.name} needs the Hugging Face checkpoint derived from {model.name} beside it "
            f"(`frank model build` puts one there); {folder} has no config.json"
        )
    return folder, paths.engine_venv_python()


def running_target(controller=None, *, reference: bool = True) -> Target:
    """The running engine; with `reference` false its reference model is not looked for (it may have none)."""
    from frank.engine.controller import EngineController

    controller = controller or EngineController()
    status = controller.status()
    if status.state != "ready":
        raise FrankError(f"fidelity needs a running engine (it is {status.state}): `frank engine start` first")
    prof = load_profile(status.profile)
    model_dir, python = reference_source(prof) if reference else (None, None)
    return Target(
        url=status.url,
        served_model=prof.served_model_name,
        model_dir=model_dir,
        python=python,
        profile=prof.name,
        knobs=dict(status.knobs),
        api_key=controller.client_api_key or prof.api_key,
        kind=prof.kind,
    )


def fidelity_runs_dir() -> Path:
    return paths.private_dir(paths.runs_dir() / "fidelity")


def load_sets(specs: Iterable[str] | None) -> list[TextSet]:
    return [load_set(resolve_set(spec)) for spec in (list(specs) if specs else list(DEFAULT_SETS))]


def target_client(target: Target) -> httpx.Client:
    headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    return httpx.Client(timeout=REQUEST_TIMEOUT_S, headers=headers)


def reference_floor(text_set: TextSet, reference: Reference, target: Target) -> float:
    """KL of the reference against its twin (another thread count), the twin rounded to float32."""
    twin = get_reference(
        text_set, target.model_dir, target.python, threads=FLOOR_THREADS, model_sha=reference.model_sha256
    )
    rounded = twin.top_logprobs.astype(np.float32).astype(np.float64)
    return mean_kl(reference.top_ids, reference.top_logprobs, dense_candidate(twin.top_ids, rounded)).kl


def _measure(text_set: TextSet, reference: Reference, candidate: Candidate) -> SetEntry:
    result = mean_kl(reference.top_ids, reference.top_logprobs, candidate)
    return {
        "name": text_set.name,
        "kl": result.kl,
        "positions": result.positions,
        "misses": result.misses,
        "max_kl": result.max_kl,
        "documents": len(text_set.documents),
        "set_sha256": text_set.sha256,
        "reference_sha256": reference.sha256,
    }


def _candidates(
    target: Target, sets: list[TextSet], refs: list[Reference], k: int, progress: Progress | None
) -> list[Candidate]:
    out = []
    with target_client(target) as client:
        for text_set, ref in zip(sets, refs):
            total = len(text_set.documents)
            if progress:
                progress(f"{text_set.name}: {total} documents through the engine ({target.kind})")

            def done(n: int, name: str = text_set.name, total: int = total) -> None:
                if progress:  # llama.cpp asks once per position: a set takes minutes there
                    progress(f"{name}: document {n} of {total} through the engine")

            docs = ref.documents()
            out.append(engine_logprobs(client, target.url, target.served_model, docs, k, done, kind=target.kind))
    return out


def _references(target: Target, sets: list[TextSet], k: int, progress: Progress | None) -> list[Reference]:
    model_sha = model_fingerprint(target.model_dir)
    refs = []
    for text_set in sets:
        if progress:
            progress(f"{text_set.name}: reference (cached after the first run)")
        refs.append(get_reference(text_set, target.model_dir, target.python, k=k, model_sha=model_sha))
    return refs


def _new_run(kind: str, target: Target, k: int) -> FidelityRun:
    run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{kind}-{secrets.token_hex(2)}"
    return {
        "id": run_id,
        "kind": kind,
        "created_at": time.time(),
        "profile": target.profile,
        "knobs": target.numeric_knobs,
        "model_sha256": model_fingerprint(target.model_dir),
        "top_k": k,
        "sets": [],
    }


def save_run(run: FidelityRun) -> Path:
    folder = paths.private_dir(fidelity_runs_dir() / run["id"])
    paths.write_private(folder / "run.json", json.dumps(run, indent=2) + "\n")
    return folder / "run.json"


def list_runs() -> list[FidelityRun]:
    """Every saved run, oldest first (unreadable ones are skipped)."""
    runs = []
    for path in sorted(fidelity_runs_dir().glob("*/run.json")):
        try:
            runs.append(cast(FidelityRun, readfile.read_object(path)))
        except FrankError:
            continue
    return sorted(runs, key=lambda r: r.get("created_at", 0))


def load_run(run_id: str) -> FidelityRun:
    path = fidelity_runs_dir() / run_id / "run.json"
    if not path.is_file():
        matches = [r for r in list_runs() if r["id"].startswith(run_id)]
        if len(matches) == 1:
            return matches[0]
        if matches:  # two runs made in the same second share their id up to its random tail
            ids = ", ".join(r["id"] for r in matches)
            raise FrankError(f"fidelity run {run_id!r} begins {len(matches)} runs' ids ({ids}): give more of it")
        raise FrankError(f"no fidelity run {run_id!r} (see `frank fidelity list`)")
    return cast(FidelityRun, readfile.read_object(path))


def known_engine_floor(profile: str, knobs: dict[str, Any], model_sha: str, set_sha: str) -> tuple[float, str] | None:
    """The latest measured engine floor (start against start) of this configuration and set, with its run."""
    for run in reversed(list_runs()):
        if (
            run.get("kind") != "floor"
            or run.get("profile") != profile
            or run.get("knobs") != knobs
            or run.get("model_sha256") != model_sha
        ):
            continue
        for entry in run["sets"]:
            if entry.get("set_sha256") == set_sha and entry.get("engine_floor") is not None:
                return entry["engine_floor"], run["id"]
    return None


def _floors(entry: SetEntry, reference_floor_kl: float, engine: tuple[float, str] | None) -> SetEntry:
    value = max(reference_floor_kl, engine[0]) if engine else reference_floor_kl
    floor = Floor(
        reference=reference_floor_kl,
        engine=engine[0] if engine else None,
        engine_run=engine[1] if engine else None,
        value=value,
    )
    entry["floor"] = floor
    entry["kl_over_floor"] = entry["kl"] / floor["value"] if floor["value"] > 0 else None
    return entry


def measure_target(
    target: Target, set_specs: Iterable[str] | None = None, *, k: int = TOP_K, progress: Progress | None = None
) -> list[tuple[SetEntry, Candidate]]:
    """Each set's entry (KL, positions, misses, hashes, floors where known) and the engine's log-probabilities."""
    sets = load_sets(set_specs)
    refs = _references(target, sets, k, progress)
    candidates = _candidates(target, sets, refs, k, progress)
    model_sha = refs[0].model_sha256
    out = []
    for text_set, ref, cand in zip(sets, refs, candidates):
        entry = _measure(text_set, ref, cand)
        engine = known_engine_floor(target.profile, target.numeric_knobs, model_sha, text_set.sha256)
        out.append((_floors(entry, reference_floor(text_set, ref, target), engine), cand))
    return out


def run_fidelity(
    set_specs: Iterable[str] | None = None,
    *,
    target: Target | None = None,
    k: int = TOP_K,
    progress: Progress | None = None,
    save: bool = True,
    label: str = "",
) -> FidelityRun:
    """Measure the running engine (or `target`) over the sets; returns (and saves) the run."""
    started = time.monotonic()
    target = target or running_target()
    measured = measure_target(target, set_specs, k=k, progress=progress)
    run = _new_run("run", target, k)
    run["label"] = label
    run["sets"] = [entry for entry, _ in measured]
    run["seconds"] = round(time.monotonic() - started, 3)
    if save:
        run["path"] = str(save_run(run))
    return run


def floor_run(
    set_specs: Iterable[str] | None = None,
    *,
    profile: str | None = None,
    knobs: dict[str, Any] | None = None,
    k: int = TOP_K,
    controller=None,
    progress: Progress | None = None,
    save: bool = True,
    versus: dict[str, Any] | None = None,
) -> FidelityRun:
    """Start the configuration twice, measure each start, and give per set the engine floor (start 2 against
    start 1's own top k), the reference floor and each start's KL against the reference. With `versus`
    (knob values), a third start with those values changed: its KL against start 1's top k stands beside
    the floor (two CPU-expert schedules, say: a change of summation order, or more)."""
    from frank.engine.controller import EngineController

    controller = controller or EngineController()
    if controller.status().state in RUNNING_STATES:
        raise FrankError(
            "an engine is running: the floor starts the configuration twice itself; stop it first (`frank engine stop`)"
        )
    started = time.monotonic()
    sets = load_sets(set_specs)
    starts: list[list[Candidate]] = []
    target = refs = running = None
    configs = [knobs, knobs] + ([{**(knobs or {}), **versus}] if versus else [])
    for n, config in enumerate(configs, 1):
        if progress:
            progress(f"start {n} of {len(configs)}: {profile or 'embedded-cpu'} {config or {}}")
        controller.start(profile, config)
        try:
            running = running_target(controller)
            target = target or running  # the run is the configuration's (start 1), not the versus start's
            refs = refs or _references(running, sets, k, progress)
            starts.append(_candidates(running, sets, refs, k, progress))
        finally:
            controller.stop()
    assert target is not None and refs is not None
    run = _new_run("floor", target, k)
    for i, (text_set, ref) in enumerate(zip(sets, refs)):
        first, second = starts[0][i], starts[1][i]
        ids, lps = top_k_arrays(first, k)
        engine_floor = mean_kl(ids, lps, second).kl
        entry = _measure(text_set, ref, first)
        entry["kl_start_2"] = mean_kl(ref.top_ids, ref.top_logprobs, second).kl
        entry["engine_floor"] = engine_floor
        if versus:
            third = starts[2][i]
            against_first = mean_kl(ids, lps, third).kl  # against start 1, as the engine floor
            entry["versus"] = Versus(
                knobs={name: running.knobs.get(name, value) for name, value in versus.items()},  # as started
                kl=against_first,
                kl_reference=mean_kl(ref.top_ids, ref.top_logprobs, third).kl,
                over_engine_floor=against_first / engine_floor if engine_floor > 0 else None,
            )
        run["sets"].append(_floors(entry, reference_floor(text_set, ref, target), (engine_floor, run["id"])))
    run["seconds"] = round(time.monotonic() - started, 3)
    if save:
        run["path"] = str(save_run(run))
    return run
