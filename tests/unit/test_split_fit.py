"""The split's fit (frank.engine.split_fit, frank.engine.exl3_checkpoint): expert bytes read from an EXL3
checkpoint's safetensors headers, counted as exllamav3 1.6.5 moves them; the floor recorded at ready; the fit;
the start's refusal; an engine out of GPU memory while loading. No GPU and no engine: NVML and exllamav3's
version are stood in for.

The checkpoint is written here with exllamav3 1.6.5's own tensor names and dtypes (its wheel,
.device/exl3/exllamav3-1.6.5-py3-none-any.whl):
- routed experts: `layers.N.ffn.experts.E.w1|w3|w2` (architecture/deepseek_v4.py:175-188; the DSpark stage's
  `mtp.0.ffn.experts.E.*`, deepseek_v4_mtp.py:92-101), each an EXL3 projection: `.trellis` I16
  (in/16, out/16, 16*K), `.suh` F16 (in), `.svh` F16 (out) and the mul1 codebook marker, an I32 scalar
  (modules/quant/exl3_lib/quantize.py:1854-1866 and 32-41, modules/quant/exl3.py:103-117; K words per tile:
  quantize.py:115-119);
- the router: `layers.N.ffn.gate.weight` F16 (an unquantized Linear, qmap None: block_sparse_mlp.py:239-247,
  stored by modules/quant/fp16.py:62-67), `.gate.bias` F32 (kept in checkpoint precision:
  block_sparse_mlp.py:826-834) and, in the hash-routed first layers, `.gate.tid2eid` I32 (deepseek_v4.py:188);
- the rest: the shared expert `layers.N.ffn.shared_experts.w1|w2|w3` (EXL3, deepseek_v4.py:196-203), attention
  `layers.N.attn.wkv` (EXL3, modules/dsv4.py:463) and `.attn.attn_sink` F32 (dsv4.py:619), the norms
  `layers.N.attn_norm.weight` / `ffn_norm.weight` / `norm.weight` F16 (modules/rmsnorm.py:54),
  hyper-connections `layers.N.hc_attn_fn|_base|_scale` F32 (modules/hyperconnections.py:109-111), `embed.weight`
  F16 and the EXL3 `head` (deepseek_v4.py:127-131, 254-262).
"""

from __future__ import annotations

import json
import os
import struct
import time
from dataclasses import replace
from pathlib import Path

import pytest

from frank.engine import exl3_checkpoint, split_fit
from frank.engine.exl3_checkpoint import CheckpointError, read_checkpoint
from frank.engine.profiles import ProfileError, load_profile
from frank.engine.split_fit import Floor, FloorKey, SplitSettings, resident
from frank.errors import FrankError
from frank.nvml import GpuMemory

HIDDEN, INTER, EXPERTS, LAYERS, HASH, VOCAB, K = 256, 128, 8, 3, 1, 64, 3
MiB = float(1 << 20)


def exl3(name: str, n_in: int, n_out: int, k: int = K, mul1: bool = True) -> dict[str, tuple[str, list[int]]]:
    out = {
        f"{name}.trellis": ("I16", [n_in // 16, n_out // 16, 16 * k]),
        f"{name}.suh": ("F16", [n_in]),
        f"{name}.svh": ("F16", [n_out]),
    }
    if mul1:
        out[f"{name}.mul1"] = ("I32", [])
    return out


def tensors(experts: int = EXPERTS, no_mul1_layer: int | None = None) -> dict[str, tuple[str, list[int]]]:
    t: dict[str, tuple[str, list[int]]] = {"embed.weight": ("F16", [VOCAB, HIDDEN]), "norm.weight": ("F16", [HIDDEN])}
    t |= exl3("head", HIDDEN, VOCAB, 6)
    for prefix in [f"layers.{i}" for i in range(LAYERS)] + ["mtp.0"]:
        t[f"{prefix}.attn_norm.weight"] = ("F16", [HIDDEN])
        t[f"{prefix}.ffn_norm.weight"] = ("F16", [HIDDEN])
        t[f"{prefix}.attn.attn_sink"] = ("F32", [8])
        t |= exl3(f"{prefix}.attn.wkv", HIDDEN, 128)
        for part, shape in (("fn", [24, 4 * HIDDEN]), ("base", [24]), ("scale", [3])):
            t[f"{prefix}.hc_attn_{part}"] = ("F32", shape)
        ffn = f"{prefix}.ffn"
        t[f"{ffn}.gate.weight"] = ("F16", [experts, HIDDEN])
        t[f"{ffn}.gate.bias"] = ("F32", [experts])
        if prefix.startswith("layers.") and int(prefix.split(".")[1]) < HASH:
            t[f"{ffn}.gate.tid2eid"] = ("I32", [VOCAB, 2])
        for w, (n_in, n_out) in {"w1": (HIDDEN, INTER), "w2": (INTER, HIDDEN), "w3": (HIDDEN, INTER)}.items():
            t |= exl3(f"{ffn}.shared_experts.{w}", n_in, n_out)
            mul1 = prefix != f"layers.{no_mul1_layer}"
            for e in range(experts):
                t |= exl3(f"{ffn}.experts.{e}.{w}", n_in, n_out, mul1=mul1)
    return t


def write_safetensors(path: Path, table: dict[str, tuple[str, list[int]]]) -> None:
    """A safetensors file as exllamav3's save_file writes one: the header, then the data (sparse zeros here)."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in table.items():
        n = exl3_checkpoint.DTYPE_BYTES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw)
        handle.truncate(8 + len(raw) + offset)


def write_checkpoint(folder: Path, **kw: object) -> Path:
    """Two shards (as the converter writes model-0000N-of-0000M.safetensors) and config.json."""
    folder.mkdir(parents=True, exist_ok=True)
    table = tensors(**kw)  # type: ignore[arg-type]
    names = list(table)
    half = len(names) // 2
    write_safetensors(folder / "model-00001-of-00002.safetensors", {n: table[n] for n in names[:half]})
    write_safetensors(folder / "model-00002-of-00002.safetensors", {n: table[n] for n in names[half:]})
    config = {"architectures": ["DeepseekV4ForCausalLM"], "num_hidden_layers": LAYERS, "n_routed_experts": EXPERTS,
              "num_hash_layers": HASH, "hidden_size": HIDDEN, "moe_intermediate_size": INTER}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def headers_json(folder: Path, out: Path) -> Path:
    """The headers JSON as scripts/device_exl3.sh writes it on the GPU machine (the same code)."""
    tables = {}
    for f in sorted(folder.glob("*.safetensors")):
        with open(f, "rb") as h:
            n = struct.unpack("<Q", h.read(8))[0]
            tables[f.name] = json.loads(h.read(n))
    config = json.loads((folder / "config.json").read_text())
    sizes = {f.name: f.stat().st_size for f in folder.glob("*.safetensors")}
    out.write_text(json.dumps({"config": config, "files": tables, "bytes": sizes}))
    return out


# one expert's bytes, by hand: three projections' trellis (K=3: 48 words a tile), suh and svh
W13 = (HIDDEN // 16) * (INTER // 16) * 48 * 2 + HIDDEN * 2 + INTER * 2  # w1 and w3
W2 = (INTER // 16) * (HIDDEN // 16) * 48 * 2 + INTER * 2 + HIDDEN * 2
EXPERT_GPU = 2 * W13 + W2  # the codebook marker is one shared CPU tensor
EXPERT_AUX = 3 * (HIDDEN + INTER) * 2  # a CPU expert's suh and svh stay on the GPU


@pytest.fixture
def ckpt(tmp_path):
    return write_checkpoint(tmp_path / "exl3-3.0bpw")


def test_the_checkpoints_experts_are_read_from_its_headers(ckpt):
    table = read_checkpoint(ckpt)
    layers = table.moe_layers
    assert [layer.key for layer in layers] == ["layers.0.ffn", "layers.1.ffn", "layers.2.ffn", "mtp.0.ffn"]
    assert [layer.hash_routed for layer in layers] == [True, False, False, False]
    assert [layer.draft for layer in layers] == [False, False, False, True]
    assert all(len(layer.experts) == EXPERTS for layer in layers)
    assert layers[1].experts[0].gpu_bytes == EXPERT_GPU
    assert layers[1].experts[0].aux_bytes == EXPERT_AUX
    # the shared expert, router, attention and the rest are not routed experts
    other = table.other_bytes(draft=True)
    everything = sum(t.nbytes for t in table.tensors.values() if not t.name.endswith(".mul1"))
    assert other == everything - 4 * EXPERTS * EXPERT_GPU
    assert table.other_bytes(draft=False) < other


def test_the_split_counts_exactly_what_exllamav3_moves(ckpt):
    table = read_checkpoint(ckpt)
    base = SplitSettings(split=0, context=4096, draft="draft-dspark")
    all_gpu = 4 * EXPERTS * EXPERT_GPU
    assert resident(table, base) == split_fit.Resident(0, all_gpu, 0, 4, 0)
    # the tail 3 of every layer, the hash-routed one and the draft's too
    three = resident(table, replace(base, split=3))
    assert three.layers_split == 4
    assert three.experts_gpu == 4 * (5 * EXPERT_GPU + 3 * EXPERT_AUX)
    assert three.experts_cpu == 4 * 3 * EXPERT_GPU
    # a split past the experts is capped at E - 1: one stays on the GPU
    capped = resident(table, replace(base, split=63))
    assert capped.split == EXPERTS - 1
    assert capped.experts_gpu == 4 * (EXPERT_GPU + 7 * EXPERT_AUX)
    # no draft: its layer is not loaded at all
    assert resident(table, replace(base, split=3, draft="none")).layers == 3
    # EXL3_MOE_CPU_SPLIT_LAYERS: the first N layers only
    two = resident(table, replace(base, split=3, layers_limit=2))
    assert two.layers_split == 2 and two.experts_gpu == 2 * (5 * EXPERT_GPU + 3 * EXPERT_AUX) + 2 * 8 * EXPERT_GPU
    # the pinned arena's promote-on-miss spares: their aux on the GPU too, never in the hash-routed layer
    spares = resident(table, replace(base, split=3, pinned_arena=True, promote=2))
    assert spares.experts_gpu == three.experts_gpu + 3 * 2 * EXPERT_AUX
    assert spares.experts_cpu == three.experts_cpu + 3 * 2 * EXPERT_GPU
    static = resident(table, replace(base, split=3, pinned_arena=True, promote=2, dynamic=False))
    assert static == three


def test_a_layer_exllamav3_would_not_split_stays_on_the_gpu(tmp_path):
    table = read_checkpoint(write_checkpoint(tmp_path / "c", no_mul1_layer=1))
    res = resident(table, SplitSettings(split=3, context=4096, draft="none"))
    assert res.layers_split == 2
    assert res.skipped == ("layers.1.ffn: experts are not mul1, CPU split skipped",)
    assert res.experts_gpu == 2 * (5 * EXPERT_GPU + 3 * EXPERT_AUX) + 8 * EXPERT_GPU


def test_the_headers_json_gives_the_same_table(ckpt, tmp_path):
    folder = read_checkpoint(ckpt)
    from_json = read_checkpoint(headers_json(ckpt, tmp_path / "exl3-checkpoint-headers.json"))
    assert from_json.fingerprint == folder.fingerprint
    settings = SplitSettings(split=21, context=4096, draft="draft-dspark")
    assert resident(from_json, settings) == resident(folder, settings)


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        ("short", "shorter than its 8-byte length"),
        ("huge", "a 200000000-byte header (at most 100000000)"),
        ("truncated", "truncated: its header says"),
        ("not-json", "its header is not JSON"),
        ("span", "layers.0.ffn.experts.0.w1.trellis: data_offsets span 6 bytes"),
        ("past", "data ends at byte"),
        ("dtype", "dtype 'Q4' is not one safetensors writes"),
        ("fifo", "not a regular file"),
    ],
)
def test_a_hostile_or_truncated_header_is_refused_naming_the_file(tmp_path, damage, says):
    folder = tmp_path / "c"
    folder.mkdir()
    bad = folder / "model.safetensors"
    good_header = {"layers.0.ffn.experts.0.w1.trellis": {"dtype": "I16", "shape": [3], "data_offsets": [0, 6]}}
    if damage == "fifo":
        os.mkfifo(bad)
    elif damage == "short":
        bad.write_bytes(b"\x01\x02")
    elif damage == "huge":
        bad.write_bytes(struct.pack("<Q", 200_000_000) + b"{}")
    elif damage == "truncated":
        bad.write_bytes(struct.pack("<Q", 1000) + b'{"a":')
    elif damage == "not-json":
        bad.write_bytes(struct.pack("<Q", 4) + b"\xff{{{" + b"\0" * 6)
    else:
        entry = good_header["layers.0.ffn.experts.0.w1.trellis"]
        if damage == "span":
            entry["shape"] = [4]
        elif damage == "past":
            entry["data_offsets"] = [0, 6]
        elif damage == "dtype":
            entry["dtype"] = "Q4"
        raw = json.dumps(good_header).encode()
        bad.write_bytes(struct.pack("<Q", len(raw)) + raw + (b"" if damage == "past" else b"\0" * 6))
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(folder)
    assert str(bad) in str(err.value) and says in str(err.value)


def test_a_damaged_headers_json_is_refused_naming_the_file_and_tensor(tmp_path):
    path = tmp_path / "h.json"
    path.write_text(json.dumps({"files": {"model.safetensors": {"x.trellis": {"dtype": "I16", "shape": [2]}}}}))
    with pytest.raises(CheckpointError, match=r"h\.json: files\.model\.safetensors: x\.trellis: data_offsets None"):
        read_checkpoint(path)


# -- the floor, the fit, the start ------------------------------------------------------------------------


@pytest.fixture
def profile(ckpt):
    return replace(load_profile("exl3-gpu-moe"), model=str(ckpt), max_model_len=4096)


def nvml(used: float, free: float):
    return lambda env: GpuMemory(0, "NVIDIA H100 80GB HBM3", used + free, used, free)


def launch(profile, split: int) -> tuple[list[str], dict[str, str]]:
    argv = ["python", "-m", "frank.engine.exl3.server", "--max-model-len", "4096", "--spec-type", "draft-dspark"]
    return argv, {**profile.env, "EXL3_MOE_CPU_SPLIT": str(split)}


def test_a_ready_start_records_its_floor_and_the_fit_uses_it(profile, tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setattr(split_fit, "exl3_version", lambda p: ("1.6.5", ""))
    monkeypatch.setattr(split_fit, "gpu_memory", nvml(used=500, free=80_000))
    check = split_fit.check_start(profile, *launch(profile, 3), state)
    assert check.notes == (
        "split fit: no floor measured yet for exllamav3 1.6.5, model frank-moe-exl3 (checkpoint "
        f"{read_checkpoint(profile.model).fingerprint}), context 4096, draft draft-dspark: this start measures it "
        "at ready",
    )
    monkeypatch.setattr(split_fit, "gpu_memory", nvml(used=3_500, free=77_000))  # at ready
    floor = check.at_ready()
    experts = 4 * (5 * EXPERT_GPU + 3 * EXPERT_AUX) / MiB
    assert floor is not None and floor.split == 3 and floor.experts_gpu_mib == round(experts, 1)
    assert floor.floor_mib == round(3_500 - 500 - experts, 1)
    assert split_fit.read_floors(state) == [floor]

    # the fit: the floor plus the experts' bytes at each split, against a budget
    need_at_0 = floor.floor_mib + 4 * EXPERTS * EXPERT_GPU / MiB
    fitted = split_fit.fit_profile(profile, {}, state, budget_mib=need_at_0 - 0.05, version="1.6.5")
    assert fitted.split == 1 and fitted.floor == floor
    assert fitted.predicted_mib == pytest.approx(floor.floor_mib + 4 * (7 * EXPERT_GPU + EXPERT_AUX) / MiB)
    assert fitted.parts["predicted"] == fitted.predicted_mib
    assert [(r.split, r.fits) for r in fitted.rows] == [(0, False), (1, True), (21, True), (63, True)]
    assert fitted.profile_split == 21 and fitted.rows[2].applied == 7
    # another exllamav3 version refits: no floor, and it says which start measures one
    stale = split_fit.fit_profile(profile, {}, state, budget_mib=need_at_0, version="1.7.0")
    assert stale.split is None and stale.needs is not None
    assert stale.needs.startswith("no floor measured for exllamav3 1.7.0")
    assert "frank engine start --profile exl3-gpu-moe --knob cpu_split=N" in stale.needs
    # split 0 is predicted from the floor of a split > 0, and says so
    assert any("measured at split 3 (with the CPU worker's GPU buffers)" in n for n in fitted.notes)


def test_the_start_refuses_a_split_predicted_not_to_fit(profile, tmp_path, monkeypatch):
    state = tmp_path / "state"
    key = FloorKey("1.6.5", "frank-moe-exl3", read_checkpoint(profile.model).fingerprint, 4096, "draft-dspark")
    split_fit.record_floor(state, Floor(key=key, split=3, floor_mib=2_000.0, at=1.0, gpu="H100"))
    monkeypatch.setattr(split_fit, "exl3_version", lambda p: ("1.6.5", ""))
    at_0 = 2_000 + 4 * EXPERTS * EXPERT_GPU / MiB
    monkeypatch.setattr(split_fit, "gpu_memory", nvml(used=100, free=at_0 - 0.1))
    with pytest.raises(ProfileError) as err:
        split_fit.check_start(profile, *launch(profile, 0), state)
    said = str(err.value)
    assert said.startswith(f"{profile.source}: knobs.cpu_split = 0: predicted {at_0:,.0f} MiB on the GPU")
    assert f"{at_0 - 0.1:,.0f} MiB free on GPU 0 (NVIDIA H100 80GB HBM3)" in said
    assert "the smallest split that fits is 1 (`frank engine fit --profile exl3-gpu-moe`)" in said
    ok = split_fit.check_start(profile, *launch(profile, 21), state)
    assert ok.notes[0].startswith("split fit: cpu_split 7 predicted ")
    # no GPU here: nothing checked, and the record says so
    monkeypatch.setattr(split_fit, "gpu_memory", lambda env: "no NVML (Driver Not Loaded)")
    assert split_fit.check_start(profile, *launch(profile, 0), state).notes == (
        "split fit: not checked: no NVML (Driver Not Loaded)",
    )


def test_an_unreadable_checkpoint_refuses_the_start_naming_the_model(profile, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.safetensors").write_bytes(b"\x01")
    with pytest.raises(ProfileError, match=r"model: .*model\.safetensors: not a safetensors file"):
        split_fit.check_start(replace(profile, model=str(broken)), *launch(profile, 3), tmp_path)


def test_an_engine_out_of_gpu_memory_while_loading_is_reported_as_that(tmp_path, monkeypatch):
    from frank.engine.controller import EngineController, _start_failure
    from frank.engine.records import EngineRecord, ExitRecord
    from frank.engine.state import StateFiles

    prof = load_profile("exl3-gpu-moe")
    log = tmp_path / "engine.log"
    lines = [
        " -- Loading model...",
        "Traceback (most recent call last):",
        "RuntimeError: Insufficient VRAM in split for model and cache",
    ]
    log.write_text("\n".join(lines) + "\n")
    record = EngineRecord(profile=prof.name, kind="exl3", log_path=str(log), argv=[], started_at=1.0, pgid=2**22 + 7)
    files = StateFiles(tmp_path / "state")
    files.write_record(record)
    files.root.joinpath("engine.exit.json").write_text(json.dumps({"returncode": 1}))
    status = EngineController(files.root).status(check_health=False)
    assert status.state == "crashed"
    assert (
        status.warning
        == "out of GPU memory while loading: RuntimeError: Insufficient VRAM in split for model and cache"
    )
    said = _start_failure(prof, record, replace(status, exit=ExitRecord(returncode=1)))
    assert said.startswith(
        "engine exl3-gpu-moe ran out of GPU memory while loading (exit code 1): RuntimeError: Insufficient "
        "VRAM in split for model and cache; `frank engine fit --profile exl3-gpu-moe` gives the smallest cpu_split"
    )


def test_the_fit_and_floors_commands(ckpt, tmp_path, monkeypatch, capsys):
    from frank.console.cli import main

    monkeypatch.setenv("FRANK_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(split_fit, "gpu_memory", lambda env: "no NVML (Driver Not Loaded)")
    monkeypatch.setattr(split_fit, "exl3_version", lambda p: (None, "FRANK_EXL3_PYTHON is not set"))
    assert main(["engine", "floors"]) == 0
    assert "no floors measured yet" in capsys.readouterr().out
    args = ["engine", "fit", "--profile", "exl3-gpu-moe", "--checkpoint", str(ckpt), "--context", "4096"]
    assert main(args) == 1  # no budget: no GPU here
    assert "give --budget-mib N" in capsys.readouterr().err
    assert main([*args, "--budget-mib", "4", "--exl3-version", "1.6.5"]) == 1  # no floor measured
    assert "no fit: no floor measured for exllamav3 1.6.5" in capsys.readouterr().out
    assert main([*args, "--budget-mib", "4", "--floor-mib", "3.5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["floor_given"] and out["split"] == 5
    assert out["predicted_mib"] == pytest.approx(3.5 + 4 * (3 * EXPERT_GPU + 5 * EXPERT_AUX) / MiB)
    assert main([*args, "--budget-mib", "4", "--floor-mib", "3.5"]) == 0
    text = capsys.readouterr().out
    assert f"fit: cpu_split 5, predicted {out['predicted_mib']:,.1f} MiB" in text
    assert "given by hand (--floor-mib), not measured" in text
    assert "(the knob takes 0, 21, 63: the smallest that fits is 21)" in text


def test_a_floor_record_that_is_not_one_is_named(tmp_path):
    (tmp_path / split_fit.FLOORS_FILE).write_text('{"split": 3}\n')
    with pytest.raises(FrankError, match=r"split-floors\.jsonl: record 1: not a floor record"):
        split_fit.read_floors(tmp_path)


def test_a_stop_measures_the_floor_again_after_serving_and_the_fit_uses_it(profile, tmp_path, monkeypatch):
    """What the first requests made the engine hold (torch's caching allocator keeps it) is in the floor a fit
    uses once the engine was stopped through frank; at ready it was not."""
    state = tmp_path / "state"
    monkeypatch.setattr(split_fit, "exl3_version", lambda p: ("1.6.5", ""))
    started_at = time.time()
    monkeypatch.setattr(split_fit, "gpu_memory", nvml(used=500, free=80_000))
    check = split_fit.check_start(profile, *launch(profile, 3), state)
    monkeypatch.setattr(split_fit, "gpu_memory", nvml(used=3_500, free=77_000))
    ready = check.at_ready()
    assert ready is not None and ready.phase == "ready"

    monkeypatch.setattr(split_fit, "gpu_memory", nvml(used=4_100, free=76_400))  # after a replay
    stopped = split_fit.floor_at_stop(profile.name, started_at, profile.env, state)
    assert stopped is not None and stopped.phase == "stop" and stopped.key == ready.key and stopped.split == 3
    assert stopped.floor_mib == round(4_100 - 500 - ready.experts_gpu_mib, 1) == round(ready.floor_mib + 600, 1)
    assert stopped.used_stop_mib == 4_100 and stopped.used_ready_mib == 3_500
    assert "4,100 MiB at its stop, after serving (3,500 at ready)" in stopped.describe()
    assert split_fit.read_floors(state) == [ready, stopped]  # both kept, the file read back equal
    fitted = split_fit.fit_profile(profile, {}, state, budget_mib=1e6, version="1.6.5")
    assert fitted.floor == stopped

    # a later start's stop without a floor of its own at ready measures nothing; neither does one without NVML
    assert split_fit.floor_at_stop(profile.name, time.time() + 1, profile.env, state) is None
    monkeypatch.setattr(split_fit, "gpu_memory", lambda env: "no NVML (Driver Not Loaded)")
    assert split_fit.floor_at_stop(profile.name, started_at, profile.env, state) is None
    assert split_fit.read_floors(state) == [ready, stopped]


def test_the_controllers_stop_measures_the_floor_and_a_failure_never_keeps_the_engine_from_stopping(
    tmp_path, monkeypatch
):
    from frank.engine.controller import EngineController
    from frank.engine.records import EngineRecord

    controller = EngineController(state_dir=tmp_path / "state")
    key = FloorKey("1.6.5", "frank-moe-exl3", "f" * 16, 4096, "draft-dspark")
    ready = Floor(key=key, split=3, floor_mib=2_000.0, used_before_mib=500.0, experts_gpu_mib=100.0,
                  used_ready_mib=2_600.0, profile="exl3-gpu-moe", at=2.0, gpu="H100")  # fmt: skip
    split_fit.record_floor(controller.files.root, ready)
    monkeypatch.setattr(split_fit, "gpu_memory", nvml(used=3_000, free=77_000))
    record = EngineRecord(profile="exl3-gpu-moe", kind="exl3", started_at=1.0)
    controller._before_stop(record)
    floors = split_fit.read_floors(controller.files.root)
    assert [f.phase for f in floors] == ["ready", "stop"] and floors[1].floor_mib == 3_000 - 500 - 100
    controller._before_stop(replace(record, kind="vllm"))  # other kinds measure nothing
    assert len(split_fit.read_floors(controller.files.root)) == 2

    (controller.files.root / split_fit.FLOORS_FILE).write_text("not json\n")
    controller._before_stop(record)  # the broken floors file is a FrankError: the stop goes on
    assert (controller.files.root / split_fit.FLOORS_FILE).read_text() == "not json\n"
