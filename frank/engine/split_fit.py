"""The split's fit: the smallest EXL3_MOE_CPU_SPLIT whose GPU-resident bytes fit a memory budget, from the
checkpoint's own expert bytes and a floor measured from a real load (docs/exl3.md, "The split's fit").

    predicted MiB at split s = floor + the routed experts' GPU-resident bytes at s

- The experts' bytes come from the checkpoint's tensors (frank.engine.exl3_checkpoint), counted as exllamav3
  1.6.5 moves them (modules/block_sparse_mlp_cpu.py, cpu_maybe_split_load and load_cpu_split): the tail s of
  every eligible MoE layer (the hash-routed ones too, the DSpark stage's with the draft), s capped at E - 1,
  EXL3_MOE_CPU_SPLIT_LAYERS' first layers only, promote-on-miss spares with the pinned arena.
- The floor is everything else the engine holds on the GPU (the other weights, the cache for the context, the
  CUDA context, exllamav3's buffers). It is measured, never assumed: when an exl3 engine becomes ready, NVML's
  used memory then, less the used memory before the start, less the experts' bytes at the split it ran, is
  appended to `split-floors.jsonl` in the state dir, keyed by exllamav3's version, the model (its name and
  tensor table's fingerprint), the context, the draft and the split. A new exllamav3 version has no floor
  until it is measured again. With no matching floor the fit says which start measures one.
- The floor of a split > 0 holds the CPU worker's GPU buffers that split 0 has not: a split is predicted from a
  floor measured on its own side of 0 when there is one, else the note says which side it came from.

`frank engine start` refuses a split whose prediction exceeds the GPU's free memory (when a floor exists),
naming both; `frank engine fit` prints the smallest split that fits and its parts.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from frank import jsonl
from frank.engine.exl3_checkpoint import Checkpoint, CheckpointError, read_checkpoint
from frank.engine.profiles import Profile, ProfileError, knob_settings, with_flags
from frank.errors import FrankError
from frank.nvml import GpuMemory, gpu_memory

MiB = float(1 << 20)
SPLIT_ENV = "EXL3_MOE_CPU_SPLIT"
FLOORS_FILE = "split-floors.jsonl"
DEFAULT_CONTEXT = 8192  # the adapter's --max-model-len default (frank/engine/exl3/server.py)
DEFAULT_PROMOTE = 4  # EXL3_MOE_CPU_PROMOTE's default (block_sparse_mlp_cpu.py:842)


# -- what the launch asks of exllamav3 -------------------------------------------------------------------


@dataclass(frozen=True)
class SplitSettings:
    split: int  # EXL3_MOE_CPU_SPLIT (or exllamav3's --moe_cpu_split), before exllamav3 caps it
    context: int  # the adapter's --max-model-len: exllamav3's cache_size
    draft: str  # the adapter's --spec-type: "draft-dspark" loads the DSpark stage (and its MoE layer)
    layers_limit: int = 0  # EXL3_MOE_CPU_SPLIT_LAYERS: split only the first N eligible layers (0: all)
    dynamic: bool = True  # EXL3_MOE_CPU_SWAP != "0": hot/cold placement (not in hash-routed layers)
    pinned_arena: bool = False  # EXL3_MOE_PINNED_ARENA / --moe_cpu_pinned_arena: promote-on-miss spares
    promote: int = DEFAULT_PROMOTE  # EXL3_MOE_CPU_PROMOTE: spare GPU slots a layer with the pinned arena

    @classmethod
    def from_launch(cls, env: Mapping[str, str], argv: Sequence[str]) -> SplitSettings:
        """What exllamav3 will read: the environment (frank's over the inherited) and the adapter's argv,
        whose extra exllamav3 flags win over the environment as in its model_init.init."""

        def flag(*names: str) -> str | None:
            for name in names:
                if name in argv and argv.index(name) + 1 < len(argv):
                    return argv[argv.index(name) + 1]
            return None

        def number(text: str | None, default: int, what: str) -> int:
            try:
                return int(text) if text not in (None, "") else default
            except ValueError:
                raise ProfileError(f"{what} = {text!r} is not a whole number") from None

        split = number(env.get(SPLIT_ENV), 0, SPLIT_ENV)
        split = number(flag("--moe_cpu_split", "-mcs"), 0, "--moe_cpu_split") or split
        return cls(
            split=split,
            context=number(flag("--max-model-len"), DEFAULT_CONTEXT, "--max-model-len"),
            draft=flag("--spec-type") or "none",
            layers_limit=number(env.get("EXL3_MOE_CPU_SPLIT_LAYERS"), 0, "EXL3_MOE_CPU_SPLIT_LAYERS"),
            dynamic=env.get("EXL3_MOE_CPU_SWAP", "1") != "0",
            pinned_arena=env.get("EXL3_MOE_PINNED_ARENA", "0") != "0"
            or any(a in argv for a in ("--moe_cpu_pinned_arena", "-mcpa")),
            promote=max(0, number(env.get("EXL3_MOE_CPU_PROMOTE"), DEFAULT_PROMOTE, "EXL3_MOE_CPU_PROMOTE")),
        )

    @classmethod
    def for_profile(cls, profile: Profile, knobs: Mapping[str, Any], context: int | None = None) -> SplitSettings:
        """As from_launch, for a profile and knob values without building the launch (its python need not
        exist here: a plan for another machine)."""
        settings = knob_settings(profile, profile.resolve_knobs(dict(knobs)))  # the defaults for the rest
        argv = with_flags(profile.resolved_extra_args(), settings.flags)
        ctx = context or profile.max_model_len
        if ctx:
            argv += ["--max-model-len", str(ctx)]
        return cls.from_launch({**os.environ, **profile.env, **settings.env}, argv)

    @property
    def with_draft(self) -> bool:
        return self.draft == "draft-dspark"


@dataclass(frozen=True)
class Resident:
    """The routed experts' bytes at one split, as exllamav3 places them."""

    split: int  # as exllamav3 applies it: capped at E - 1
    experts_gpu: int  # bytes on the GPU: the GPU slices whole, the CPU experts' suh/svh/bias
    experts_cpu: int  # bytes the CPU worker holds (host memory)
    layers: int  # MoE layers loaded
    layers_split: int  # of them split
    skipped: tuple[str, ...] = ()  # "layers.3.ffn: experts are not mul1": layers exllamav3 would not split


def resident(checkpoint: Checkpoint, settings: SplitSettings) -> Resident:
    """The experts' GPU and CPU bytes at settings.split (cpu_maybe_split_load, block_sparse_mlp_cpu.py:428-461;
    load_cpu_split, :778-934)."""
    gpu = cpu = assigned = loaded = 0
    applied = settings.split
    skipped: list[str] = []
    for layer in checkpoint.moe_layers:
        if layer.draft and not settings.with_draft:
            continue
        loaded += 1
        count = len(layer.experts)
        k = settings.split
        if settings.layers_limit and assigned >= settings.layers_limit:
            k = 0
        if k >= count > 1:
            k = count - 1
            applied = min(applied, k)
        why = layer.refusal(count - k) if 0 < k < count else None
        if not 0 < k < count or why is not None:
            if why is not None:
                skipped.append(f"{layer.key}: {why}, CPU split skipped")
            gpu += layer.gpu_bytes(count, count)
            continue
        assigned += 1
        first = count - k
        dynamic = settings.dynamic and not layer.hash_routed
        spares = min(settings.promote if dynamic and settings.pinned_arena else 0, max(0, first - 1))
        gpu += layer.gpu_bytes(first, first - spares)
        cpu += layer.cpu_bytes(first - spares)
    return Resident(applied, gpu, cpu, loaded, assigned, tuple(skipped))


# -- NVML and exllamav3's version --------------------------------------------------------------------------


def exl3_version(profile: Profile) -> tuple[str | None, str]:
    """(exllamav3's version in the profile's python, or None; why not), read from its package metadata in a
    child (nothing is imported)."""
    try:
        python = profile.python_path()
    except ProfileError as exc:
        return None, str(exc)
    if not python.exists():
        return None, f"the profile's python {python} does not exist"
    try:
        done = subprocess.run(
            [str(python), "-c", "import importlib.metadata as m; print(m.version('exllamav3'))"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{python}: {exc}"
    if done.returncode != 0 or not done.stdout.strip():
        return None, f"exllamav3 is not installed for {python}"
    return done.stdout.strip(), ""


# -- the floors measured at ready ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FloorKey:
    exllamav3: str
    model: str  # the served model's name
    checkpoint: str  # the tensor table's fingerprint
    context: int
    draft: str

    def describe(self) -> str:
        return (
            f"exllamav3 {self.exllamav3}, model {self.model} (checkpoint {self.checkpoint}), context {self.context}, "
            f"draft {self.draft}"
        )


@dataclass(frozen=True)
class Floor:
    key: FloorKey
    split: int  # the split it ran at, as exllamav3 applied it
    floor_mib: float  # used at ready - used before - the experts' GPU bytes at the split
    used_before_mib: float = 0.0  # NVML's used memory of the GPU before the start
    used_ready_mib: float = 0.0  # and at ready
    experts_gpu_mib: float = 0.0  # the predicted routed-expert bytes at the split
    gpu: str = ""
    profile: str = ""
    at: float = 0.0  # wall clock
    given: bool = False  # a floor given by hand (--floor-mib), not measured
    # "ready": measured when the engine became ready; "stop": measured again as it was stopped, after it served
    # (torch's caching allocator keeps what the requests grew: the first prefills' buffers are in it)
    phase: str = "ready"
    used_stop_mib: float = 0.0  # NVML's used memory at the stop (phase "stop")

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(out.pop("key"))
        out.pop("given")
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Floor:
        key = FloorKey(**{k: data[k] for k in ("exllamav3", "model", "checkpoint", "context", "draft")})
        rest = {k: data[k] for k in ("split", "floor_mib", "used_before_mib", "used_ready_mib", "experts_gpu_mib",
                                     "gpu", "profile", "at", "phase", "used_stop_mib") if k in data}  # fmt: skip
        if rest.get("phase", "ready") not in ("ready", "stop"):
            raise TypeError(f"phase {rest['phase']!r} is neither 'ready' nor 'stop'")
        return cls(key=key, **rest)

    def describe(self) -> str:
        if self.given:
            return f"{self.floor_mib:,.0f} MiB, given by hand (--floor-mib), not measured"
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.at))
        used = (
            f"{self.used_stop_mib:,.0f} MiB at its stop, after serving ({self.used_ready_mib:,.0f} at ready)"
            if self.phase == "stop"
            else f"{self.used_ready_mib:,.0f} MiB at ready"
        )
        return (
            f"{self.floor_mib:,.0f} MiB, measured {when} at split {self.split} on {self.gpu}: NVML used "
            f"{used} - {self.used_before_mib:,.0f} before - {self.experts_gpu_mib:,.0f} of routed experts"
        )


def floors_path(state_dir: Path) -> Path:
    return state_dir / FLOORS_FILE


def read_floors(state_dir: Path) -> list[Floor]:
    """Every floor recorded here, oldest first (a record that is not one is an error naming file:line)."""
    path = floors_path(state_dir)
    out = []
    for number, data in enumerate(jsonl.read(path), 1):
        try:
            out.append(Floor.from_json(data))
        except (KeyError, TypeError) as exc:
            raise FrankError(f"{path}: record {number}: not a floor record ({exc})") from None
    return out


def record_floor(state_dir: Path, floor: Floor) -> None:
    from frank.paths import private_dir

    private_dir(state_dir)
    jsonl.append(floors_path(state_dir), floor.to_json(), sort_keys=True)


def floor_at_stop(profile: str, started_at: float | None, env: Mapping[str, str], state_dir: Path) -> Floor | None:
    """As an exl3 engine is stopped (before its processes are signalled): the floor measured again, from the
    floor its start recorded at ready and NVML's used memory now, appended; None when its start recorded none
    or NVML cannot be read. The newest floor is the one a fit uses, so a fit after a served session counts
    what the requests made the engine hold, not only what it held at ready."""
    if started_at is None:
        return None
    ready = [f for f in read_floors(state_dir) if f.phase == "ready" and f.profile == profile and f.at >= started_at]
    if not ready:
        return None
    now = gpu_memory({**os.environ, **env})
    if isinstance(now, str):
        return None
    at_ready = max(ready, key=lambda f: f.at)
    floor = replace(
        at_ready,
        phase="stop",
        floor_mib=round(now.used_mib - at_ready.used_before_mib - at_ready.experts_gpu_mib, 1),
        used_stop_mib=round(now.used_mib, 1),
        at=time.time(),
    )
    record_floor(state_dir, floor)
    return floor


def floor_for(floors: Sequence[Floor], key: FloorKey, split: int) -> tuple[Floor | None, str]:
    """The newest floor of `key` measured on split's side of 0 (at a stop, after serving, when the newest start
    was stopped through frank), else the newest of `key` with a note saying which side it came from; (None, "")
    when `key` has none."""
    matching = [f for f in floors if f.key == key]
    same = [f for f in matching if (f.split > 0) == (split > 0)]
    if same:
        return max(same, key=lambda f: f.at), ""
    if not matching:
        return None, ""
    other = max(matching, key=lambda f: f.at)
    side = "with the CPU worker's GPU buffers" if other.split > 0 else "without the CPU worker's GPU buffers"
    return other, f"split {split}'s floor is the one measured at split {other.split} ({side})"


def needed_measurement(profile: str, key: FloorKey, knob: str | None) -> str:
    how = f" --knob {knob}=N" if knob else ""
    return (
        f"no floor measured for {key.describe()}: start it once at a known split (`frank engine start --profile "
        f"{profile}{how}`); frank records the floor when it is ready"
    )


# -- the fit -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitRow:
    split: int  # as asked
    applied: int  # as exllamav3 applies it
    experts_gpu_mib: float
    predicted_mib: float | None  # None: no floor
    fits: bool | None


@dataclass(frozen=True)
class Fit:
    profile: str
    checkpoint: str
    fingerprint: str
    key: FloorKey | None  # None: exllamav3's version unknown
    budget_mib: float
    budget_from: str
    split: int | None  # the smallest that fits; None: none fits, or no floor
    predicted_mib: float | None
    knob: str | None  # the profile's knob that sets EXL3_MOE_CPU_SPLIT
    profile_values: tuple[int, ...]
    profile_split: int | None  # the smallest of the knob's values that fits
    rows: tuple[FitRow, ...]  # the knob's values, and the fitted split
    parts: dict[str, float]  # MiB at parts_split
    parts_split: int  # the fitted split; none fits: the largest; no floor: the split the launch asks for
    floor: Floor | None
    layers: int
    draft_layers: int
    experts_per_layer: int
    expert_mib: float  # one routed expert on the GPU
    needs: str | None = None  # what must be measured (or given) before a split can be fitted
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["floor"] = self.floor.to_json() if self.floor else None
        out["floor_given"] = bool(self.floor and self.floor.given)
        out["key"] = asdict(self.key) if self.key else None
        return out


def split_knob(profile: Profile) -> str | None:
    return next((n for n, k in profile.knobs.items() if k.apply == "env" and k.target == SPLIT_ENV), None)


def fit(
    checkpoint: Checkpoint,
    settings: SplitSettings,
    *,
    profile: Profile,
    key: FloorKey | None,
    floors: Sequence[Floor],
    budget_mib: float,
    budget_from: str,
    why_no_key: str = "",
) -> Fit:
    """The smallest split whose prediction fits the budget, each of the profile's values' prediction, and the
    parts at the fitted split."""
    layers = [layer for layer in checkpoint.moe_layers if settings.with_draft or not layer.draft]
    if not layers:
        raise CheckpointError(f"{checkpoint.source}: no routed experts (no `*.experts.N.*` tensors): no split to fit")
    count = max(len(layer.experts) for layer in layers)
    knob = split_knob(profile)
    values = tuple(int(v) for v in profile.knobs[knob].values) if knob else ()
    notes: list[str] = []

    def row(split: int) -> tuple[FitRow, Floor | None, Resident]:
        res = resident(checkpoint, replace(settings, split=split))
        floor, note = floor_for(floors, key, res.split) if key else (None, "")
        if note and note not in notes:
            notes.append(note)
        predicted = floor.floor_mib + res.experts_gpu / MiB if floor else None
        fits = predicted <= budget_mib if predicted is not None else None
        return FitRow(split, res.split, res.experts_gpu / MiB, predicted, fits), floor, res

    found: tuple[FitRow, Floor | None, Resident] | None = None
    last = None
    for split in range(count):
        last = row(split)
        if last[0].fits:
            found = last
            break
    assert last is not None
    # the parts at the fitted split; none fits: at the largest; no floor: at the split the launch asks for
    chosen = found or (last if last[1] is not None else row(settings.split))
    chosen_row, floor, res = chosen
    rows = {v: row(v)[0] for v in values}
    if found:
        rows[chosen_row.split] = chosen_row
    profile_split = next((v for v in sorted(values) if rows[v].fits), None)
    other = checkpoint.other_bytes(settings.with_draft) / MiB
    parts = {
        "weights other than routed experts (in the floor)": other,
        "routed experts on the GPU": res.experts_gpu / MiB,
        "routed experts on the CPU worker (host memory)": res.experts_cpu / MiB,
    }
    if floor is not None:
        parts = {
            "floor": floor.floor_mib,
            "floor beyond the other weights (cache, CUDA context, buffers)": floor.floor_mib - other,
            **parts,
            "predicted": floor.floor_mib + res.experts_gpu / MiB,
        }
    needs = None
    if key is None:
        needs = f"exllamav3's version is unknown ({why_no_key}): give --exl3-version, or --floor-mib"
    elif floor is None:
        needs = needed_measurement(profile.name, key, knob)
    elif not found:
        notes.append(
            f"no split fits: even cpu_split {chosen_row.split} predicts {chosen_row.predicted_mib:,.0f} MiB, "
            f"over {budget_mib:,.0f}"
        )
    notes += list(res.skipped)
    first = layers[0]
    return Fit(
        profile=profile.name,
        checkpoint=checkpoint.source,
        fingerprint=checkpoint.fingerprint,
        key=key,
        budget_mib=budget_mib,
        budget_from=budget_from,
        split=chosen_row.split if found else None,
        predicted_mib=chosen_row.predicted_mib if found else None,
        knob=knob,
        profile_values=values,
        profile_split=profile_split,
        rows=tuple(rows[v] for v in sorted(rows)),
        parts=parts,
        parts_split=chosen_row.split,
        floor=floor,
        layers=sum(1 for layer in layers if not layer.draft),
        draft_layers=sum(1 for layer in layers if layer.draft),
        experts_per_layer=count,
        expert_mib=first.experts[0].gpu_bytes / MiB,
        needs=needs,
        notes=tuple(notes),
    )


def fit_profile(
    profile: Profile,
    knobs: Mapping[str, Any],
    state_dir: Path,
    *,
    checkpoint: str | None = None,
    context: int | None = None,
    budget_mib: float | None = None,
    version: str | None = None,
    floor_mib: float | None = None,
) -> Fit:
    """`frank engine fit`: the profile's checkpoint (or one named), its floors recorded here, the budget
    given or the GPU's free memory now."""
    settings = SplitSettings.for_profile(profile, knobs, context)
    path = checkpoint or profile.model_path()
    if not Path(path).exists():
        raise FrankError(
            f"{path}: no checkpoint here: give --checkpoint DIR (exllamav3's converter's output) or a headers "
            "JSON (scripts/device_exl3.sh writes bench/exl3-checkpoint-headers.json)"
        )
    ckpt = read_checkpoint(path)
    if budget_mib is not None:
        budget, budget_from = float(budget_mib), "given by --budget-mib"
    else:
        memory = gpu_memory({**os.environ, **profile.env})
        if isinstance(memory, str):
            raise FrankError(f"no GPU's free memory to fit ({memory}): give --budget-mib N to plan for a card")
        budget, budget_from = memory.free_mib, f"free on {memory.describe()}"
    why = ""
    if version is None:
        version, why = exl3_version(profile)
    key = (
        FloorKey(version, profile.served_model_name, ckpt.fingerprint, settings.context, settings.draft)
        if version
        else None
    )
    floors = read_floors(state_dir)
    if floor_mib is not None:  # a floor given by hand: it stands for both sides of 0, and says it was given
        key = key or FloorKey("unknown", profile.served_model_name, ckpt.fingerprint, settings.context, settings.draft)
        floors = [Floor(key=key, split=side, floor_mib=float(floor_mib), given=True) for side in (0, 1)]
    return fit(ckpt, settings, profile=profile, key=key, floors=floors, budget_mib=budget, budget_from=budget_from,
               why_no_key=why)  # fmt: skip


# -- the start's check and the floor at ready ---------------------------------------------------------------


@dataclass
class StartFit:
    """What the start keeps between its check and ready: the GPU's memory before, the experts at the split."""

    notes: tuple[str, ...] = ()
    state_dir: Path | None = None
    profile: str = ""
    env: dict[str, str] = field(default_factory=dict)
    key: FloorKey | None = None
    resident: Resident | None = None
    before: GpuMemory | None = None

    def at_ready(self) -> Floor | None:
        """Record the floor this start measured (NVML's used memory now), or None when it cannot."""
        if self.key is None or self.resident is None or self.before is None or self.state_dir is None:
            return None
        now = gpu_memory(self.env)
        if isinstance(now, str):
            return None
        experts = self.resident.experts_gpu / MiB
        floor = Floor(
            key=self.key,
            split=self.resident.split,
            floor_mib=round(now.used_mib - self.before.used_mib - experts, 1),
            used_before_mib=round(self.before.used_mib, 1),
            used_ready_mib=round(now.used_mib, 1),
            experts_gpu_mib=round(experts, 1),
            gpu=now.name,
            profile=self.profile,
            at=time.time(),
        )
        record_floor(self.state_dir, floor)
        return floor


def check_start(profile: Profile, argv: Sequence[str], env: Mapping[str, str], state_dir: Path) -> StartFit:
    """Before an exl3 start: refuse (ProfileError) a split whose predicted MiB exceeds the GPU's free memory,
    when a floor for this exllamav3, model, context and draft exists; else say none does and that this start
    measures one. Nothing to check without routed experts or NVML."""
    full_env = {**os.environ, **env}
    settings = SplitSettings.from_launch(full_env, argv)
    try:
        ckpt = read_checkpoint(profile.model_path())
    except CheckpointError as exc:
        raise ProfileError(f"{profile.source}: model: {exc}") from None
    if not any(settings.with_draft or not layer.draft for layer in ckpt.moe_layers):
        return StartFit()
    res = resident(ckpt, settings)
    memory = gpu_memory(full_env)
    if isinstance(memory, str):
        return StartFit(notes=(f"split fit: not checked: {memory}",))
    version, why = exl3_version(profile)
    if version is None:
        return StartFit(notes=(f"split fit: not checked, no floor recorded: exllamav3's version is unknown ({why})",))
    key = FloorKey(version, profile.served_model_name, ckpt.fingerprint, settings.context, settings.draft)
    keep = StartFit((), state_dir, profile.name, full_env, key, res, memory)
    floor, side = floor_for(read_floors(state_dir), key, res.split)
    knob = split_knob(profile)
    if floor is None:
        keep.notes = (f"split fit: no floor measured yet for {key.describe()}: this start measures it at ready",)
        return keep
    predicted = floor.floor_mib + res.experts_gpu / MiB
    if predicted > memory.free_mib:
        field_ = f"knobs.{knob} = {settings.split}" if knob else f"env.{SPLIT_ENV} = {settings.split}"
        smallest = fit(ckpt, settings, profile=profile, key=key, floors=read_floors(state_dir),
                       budget_mib=memory.free_mib, budget_from="free")  # fmt: skip
        hint = (
            f"the smallest split that fits is {smallest.split}" if smallest.split is not None else "no split fits"
        ) + f" (`frank engine fit --profile {profile.name}`)"
        raise ProfileError(
            f"{profile.source}: {field_}: predicted {predicted:,.0f} MiB on the GPU (a floor of {floor.floor_mib:,.0f} "
            f"measured at split {floor.split} + {res.experts_gpu / MiB:,.0f} of routed experts), "
            f"{memory.free_mib:,.0f} MiB free on {memory.describe()}: {hint}"
        )
    keep.notes = (
        f"split fit: cpu_split {res.split} predicted {predicted:,.0f} MiB, {memory.free_mib:,.0f} MiB free on "
        f"{memory.describe()} (floor measured at split {floor.split}{'; ' + side if side else ''})",
    )
    return keep
