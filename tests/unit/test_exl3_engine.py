"""The exllamav3 engine kind without a GPU: the exl3-gpu-moe profile's exact command line and EXL3_MOE_*
environment, every EXL3_* name of every shipped profile proven against exllamav3 1.6.5's own wheel
(`make exl3-wheel`), and the GPU machine's carried wheels against the wheel's Requires-Dist."""

from __future__ import annotations

import email.parser
import os
import re
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from frank import paths
from frank.engine import cpu_pool
from frank.engine.kinds import build_launch, kind_of
from frank.engine.profiles import Profile, ProfileError, list_profiles, load_profile
from scripts.check_exl3_names import check

REPO = Path(__file__).resolve().parents[2]
WHEEL = REPO / ".device/exl3/exllamav3-1.6.5-py3-none-any.whl"
# cpu_threads "auto": exllamav3's own default on this machine, the physical cores less EXL3_MOE_HOST_CORES (1)
AUTO_THREADS = str(max(1, cpu_pool.physical_cores() - 1))
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@pytest.fixture(scope="module")
def wheel() -> Path:
    assert WHEEL.is_file(), f"{WHEEL} is missing: `make exl3-wheel` downloads it"
    return WHEEL


def test_exl3_gpu_moe_exact_command_line_and_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FRANK_EXL3_PYTHON", "/opt/exl3/bin/python3")
    monkeypatch.setenv("FRANK_MODELS", str(tmp_path))
    prof = load_profile("exl3-gpu-moe")
    spec = build_launch(prof, prof.default_knobs(), 8093, "TOKEN")
    assert spec.argv == [
        "/opt/exl3/bin/python3",
        "-m",
        "frank.engine.exl3.server",
        "--model",
        str(tmp_path / "frank-moe-exl3/exl3-3.0bpw"),
        "--served-model-name",
        "frank-moe-exl3",
        "--host",
        "127.0.0.1",
        "--port",
        "8093",
        "--max-model-len",
        "32768",
        "--draft-tokens",
        "3",
        "--spec-type",
        "draft-dspark",
    ]
    assert spec.env == {
        "EXL3_MOE_CPU_SPLIT": "21",  # a third of the 64 routed experts per layer
        "EXL3_MOE_CPU_THREADS": AUTO_THREADS,
        "EXL3_MOE_CPU_PIN": "1",  # schedule 2: the pool pinned one thread per core
        "EXL3_MOE_CPU_SWAP": "1",  # dynamic hot/cold placement
        "EXL3_MOE_CPU_SLOTS": "4",  # exllamav3's own default, written out
        "EXL3_MOE_HOST_CORES": "1",
        "EXL3_MOE_CPU_PROF": "1",
        "EXL3_SPLIT_PROF": "1",
        "EXL3_MOE_CPU_SWAP_DEBUG": "1",  # the placement's swaps logged (frank.telemetry.cpu_decode)
        "EXL3_MOE_HANDOFF_PROF": "1",  # the CPU worker's gap, spin and compute every 64 jobs (the same)
        "TORCH_CUDA_ARCH_LIST": "9.0",
        "FRANK_CONTROL_TOKEN": "TOKEN",  # the key every route but /health takes, never in argv
        "PYTHONPATH": str(REPO),
        **MULTICAST_OFF,
    }
    assert "TOKEN" not in " ".join(spec.argv)


@pytest.mark.parametrize(
    "knobs, expected",
    [
        ({"cpu_experts_sched": 1}, {"EXL3_MOE_CPU_PIN": "0"}),  # threads placed by the kernel
        ({"cpu_placement": "static"}, {"EXL3_MOE_CPU_SWAP": "0"}),
        ({"cpu_split": 0, "cpu_threads": 8}, {"EXL3_MOE_CPU_SPLIT": "0", "EXL3_MOE_CPU_THREADS": "8"}),
        ({"cpu_split": 63}, {"EXL3_MOE_CPU_SPLIT": "63"}),
        ({"cpu_slots": 8, "cpu_threads": 12}, {"EXL3_MOE_CPU_SLOTS": "8", "EXL3_MOE_CPU_THREADS": "12"}),
    ],
)
def test_exl3_knobs_set_exllamav3s_own_variables(monkeypatch, knobs, expected):
    monkeypatch.setenv("FRANK_EXL3_PYTHON", "/opt/exl3/bin/python3")
    prof = load_profile("exl3-gpu-moe")
    env = build_launch(prof, prof.resolve_knobs(knobs), 8093, "T").env
    assert {k: env[k] for k in expected} == expected


def test_exl3_without_a_draft_drops_the_spec_type(monkeypatch):
    monkeypatch.setenv("FRANK_EXL3_PYTHON", "/opt/exl3/bin/python3")
    prof = load_profile("exl3-gpu-moe")
    argv = build_launch(prof, prof.resolve_knobs({"speculative": "none"}), 8093, "T").argv
    assert argv[argv.index("--spec-type") + 1] == "none"


def test_exl3_python_from_an_unset_variable_is_named(monkeypatch, tmp_path):
    monkeypatch.delenv("FRANK_EXL3_PYTHON", raising=False)
    monkeypatch.setenv("FRANK_MODELS", str(tmp_path))
    (tmp_path / "frank-moe-exl3/exl3-3.0bpw").mkdir(parents=True)
    prof = load_profile("exl3-gpu-moe")
    with pytest.raises(ProfileError, match=r"exl3-gpu-moe.toml: python: the environment variable FRANK_EXL3_PYTHON"):
        kind_of(prof).preflight(prof)


def test_dry_run_prints_the_servers_command_line_and_exl3_environment(frank_cli, fresh_frank_home):
    out = frank_cli.json(
        "engine", "start", "--profile", "exl3-gpu-moe", "--dry-run", "--knob", "cpu_experts_sched=1",
        env={"FRANK_EXL3_PYTHON": "/opt/exl3/bin/python3"},
    )  # fmt: skip
    assert out["argv"][:3] == ["/opt/exl3/bin/python3", "-m", "frank.engine.exl3.server"]
    assert {k: v for k, v in out["env"].items() if k.startswith("EXL3_")} == {
        "EXL3_MOE_CPU_SPLIT": "21",
        "EXL3_MOE_CPU_THREADS": AUTO_THREADS,
        "EXL3_MOE_CPU_PIN": "0",
        "EXL3_MOE_CPU_SWAP": "1",
        "EXL3_MOE_CPU_SLOTS": "4",
        "EXL3_MOE_HOST_CORES": "1",
        "EXL3_MOE_CPU_PROF": "1",
        "EXL3_SPLIT_PROF": "1",
        "EXL3_MOE_CPU_SWAP_DEBUG": "1",  # the placement's swaps logged (frank.telemetry.cpu_decode)
        "EXL3_MOE_HANDOFF_PROF": "1",  # the CPU worker's gap, spin and compute every 64 jobs (the same)
    }
    assert out["env"]["FRANK_CONTROL_TOKEN"] == "<generated at start>"
    # the thread count resolved here, and how
    cores = cpu_pool.physical_cores()
    assert out["notes"][0] == f"cpu_threads auto = {AUTO_THREADS}: {cores} physical cores less EXL3_MOE_HOST_CORES (1)"


def test_a_thread_count_that_leaves_the_host_no_core_is_named(monkeypatch):
    monkeypatch.setenv("FRANK_EXL3_PYTHON", "/opt/exl3/bin/python3")
    prof = load_profile("exl3-gpu-moe")
    monkeypatch.setattr(cpu_pool, "physical_cores", lambda: 16)  # the GPU machine's
    starved = build_launch(prof, prof.resolve_knobs({"cpu_threads": 16}), 8093, "T").notes
    assert starved == (
        "EXL3_MOE_CPU_THREADS=16 leaves the host process no core (16 physical cores): on the 16-vCPU GPU machine "
        '16 threads decoded about 9x slower than 8 (docs/exl3.md, "Threads")',
    )
    assert build_launch(prof, prof.resolve_knobs({"cpu_threads": 8}), 8093, "T").notes == ()
    auto = build_launch(prof, prof.resolve_knobs({}), 8093, "T")
    assert auto.env["EXL3_MOE_CPU_THREADS"] == "15" and auto.notes == (
        "cpu_threads auto = 15: 16 physical cores less EXL3_MOE_HOST_CORES (1)",
    )


def test_every_exl3_name_of_every_shipped_profile_is_read_by_the_wheel(wheel):
    profiles = [p for p in list_profiles() if isinstance(p, Profile)]
    lines, ok = check(wheel, profiles)
    assert ok, "\n".join(lines)
    exl3 = [ln for ln in lines if "exl3-gpu-moe" in ln]
    names = {ln.split(": ", 1)[1].split()[0] for ln in exl3}
    assert names == {  # every EXL3_* name the profile sets, each proven once
        "EXL3_MOE_HOST_CORES",
        "EXL3_MOE_CPU_PROF",
        "EXL3_SPLIT_PROF",
        "EXL3_MOE_CPU_SPLIT",
        "EXL3_MOE_CPU_THREADS",
        "EXL3_MOE_CPU_PIN",
        "EXL3_MOE_CPU_SWAP",
        "EXL3_MOE_CPU_SLOTS",
        "EXL3_MOE_CPU_SWAP_DEBUG",
        "EXL3_MOE_HANDOFF_PROF",
    }, exl3
    assert len(exl3) == len(names) and all(ln.startswith("ok ") for ln in exl3), exl3
    # the C++ pool's pinning switch is found in the sources the wheel compiles, not in its Python
    assert any("EXL3_MOE_CPU_PIN" in ln and "moe_mul1.cpp" in ln for ln in exl3)
    assert any("EXL3_MOE_CPU_SLOTS (knobs.cpu_slots)" in ln and "moe_cpu_host.py" in ln for ln in exl3)
    # the seed's own schedule variable is exllamav3's nowhere, and said so
    assert any(ln.startswith("elsewhere frankenstein: EXL3_CPU_EXPERTS_SCHED") for ln in lines)


def test_a_profile_name_the_wheel_does_not_read_fails_the_check(wheel, tmp_path, monkeypatch):
    text = (REPO / "frank/engine/profiles/exl3-gpu-moe.toml").read_text()
    bad = tmp_path / "exl3-typo.toml"
    bad.write_text(text.replace('name = "exl3-gpu-moe"', 'name = "exl3-typo"').replace("CPU_PIN", "CPU_PINNING"))
    from frank.engine.profiles import load_profile_file

    lines, ok = check(wheel, [load_profile_file(bad)])
    assert not ok
    assert "UNKNOWN  exl3-typo: EXL3_MOE_CPU_PINNING (knobs.cpu_experts_sched) is not read anywhere" in "\n".join(lines)


def _requires(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as zf:
        meta = zf.read("exllamav3-1.6.5.dist-info/METADATA").decode()
    reqs = [Requirement(r) for r in email.parser.Parser().parsestr(meta).get_all("Requires-Dist")]
    env = {"platform_system": "Linux", "extra": ""}
    return [r for r in reqs if r.marker is None or r.marker.evaluate(env)]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _listed(name: str) -> dict[str, str]:
    """A wheel list's `name==version` lines (or bare names, for the image's) -> version or ""."""
    lines = [ln.strip() for ln in (REPO / "scripts" / name).read_text().splitlines()]
    return {_norm(ln.split("==")[0]): ln.partition("==")[2] for ln in lines if ln and not ln.startswith("#")}


def test_the_carried_wheels_cover_exllamav3s_requirements(wheel):
    carried, console = _listed("exl3-wheels.txt"), _listed("device-wheels.txt")
    image = _listed("gpu-image-packages.txt")
    assert carried["exllamav3"] == "1.6.5"
    requires = _requires(wheel)
    assert {_norm(r.name) for r in requires} >= {"torch", "pydantic", "llguidance", "marisa-trie"}
    for req in requires:
        name = _norm(req.name)
        pinned = carried.get(name) or console.get(name)
        assert pinned or name in image, f"exllamav3 requires {req}: in no wheel list and not in the image"
        if pinned:
            assert req.specifier.contains(pinned), f"carried {name}=={pinned} is outside {req}"
    assert not carried.keys() & (console.keys() | image.keys()), "a package carried twice"
    # SmolLM2's checkpoint is derived there too: the GGUF reader at the engine lock's pin (accelerate: the image's)
    engine = (REPO / "locks" / "engine.txt").read_text()
    assert re.search(rf"^gguf=={re.escape(carried['gguf'])} ", engine, re.M) and "accelerate" in image


def test_the_exl3_model_fits_exllamav3_and_the_profiles_third():
    from frank.engine.models import moe_model

    spec = moe_model.spec_for("frank-moe-exl3")
    d = spec.dims
    assert spec.keep_layout and not spec.reference
    # exllamav3 asserts dimensions divisible by 16 (and pads to 128 for its Hadamard transforms)
    assert all(d[k] % 128 == 0 for k in ("hidden_size", "moe_intermediate_size", "q_lora_rank", "o_lora_rank"))
    experts = d["num_hidden_layers"] * d["n_routed_experts"] * 3 * d["hidden_size"] * d["moe_intermediate_size"]
    assert 1.0e9 < experts < 1.4e9  # about 1.2B: compile + build + quantize + runs in one GPU session
    # the profile's cpu_split values: none, a third, all (exllamav3 keeps one expert on the GPU)
    knob = load_profile("exl3-gpu-moe").knobs["cpu_split"]
    assert knob.values == (0, round(d["n_routed_experts"] / 3), d["n_routed_experts"] - 1)
    # exllamav3 finds the DSpark stage one compress_ratios entry past the trunk, its Markov rank by name
    config = moe_model.exl3_layout_config(moe_model.config_for(spec), spec)
    assert len(config["compress_ratios"]) == d["num_hidden_layers"] + 1 and config["compress_ratios"][-1] == 0
    assert config["dspark_markov_rank"] == spec.dspark["markov_rank"]
    assert len(moe_model.config_for(spec)["compress_ratios"]) == d["num_hidden_layers"]  # llama.cpp's stays


EXL3_DTYPES_PROBE = """
import sys, torch
from safetensors.torch import load_file, save_file
path = sys.argv[1]
if sys.argv[2] == "write":
    save_file({
        "layers.0.attn.wo_a.weight": torch.ones(4, 4),
        "layers.0.attn.attn_sink": torch.ones(4),
        "layers.0.ffn.gate.bias": torch.ones(4),
        "layers.0.hc_attn_fn": torch.ones(2, 2),
        "layers.0.ffn.experts.0.w1.weight": torch.ones(4, 2, dtype=torch.int8),
        "embed.weight": torch.ones(8, 4),
    }, path)
else:
    print({k: str(v.dtype) for k, v in sorted(load_file(path).items())})
"""


@pytest.mark.skipif(not paths.engine_venv_python().exists(), reason="no engine venv (torch)")
def test_an_old_float32_checkpoint_gets_deepseeks_dtypes_once(tmp_path):
    """exllamav3's converter refused frank-moe-exl3's all-float32 export on the GPU machine (a float32 wo_a in an
    fp16 matmul); the script gives an old build DeepSeek-V4's own dtypes and is idempotent."""
    import subprocess

    py, ckpt = str(paths.engine_venv_python()), tmp_path / "deepseek" / "model.safetensors"
    ckpt.parent.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([py, "-c", EXL3_DTYPES_PROBE, str(ckpt), "write"], check=True, env=env)
    fix = [py, str(REPO / "scripts" / "exl3_checkpoint_dtypes.py"), str(tmp_path)]
    first = subprocess.run(fix, capture_output=True, text=True, check=True, env=env).stdout
    assert "float32->bfloat16: 2 tensors" in first
    second = subprocess.run(fix, capture_output=True, text=True, check=True, env=env).stdout
    assert "nothing changed" in second
    dtypes = subprocess.run([py, "-c", EXL3_DTYPES_PROBE, str(ckpt), "read"], capture_output=True, text=True,
                            check=True, env=env).stdout  # fmt: skip
    assert dtypes.strip() == str({
        "embed.weight": "torch.bfloat16",
        "layers.0.attn.attn_sink": "torch.float32",  # read back with .float() by exllamav3, as DeepSeek keeps them
        "layers.0.attn.wo_a.weight": "torch.bfloat16",
        "layers.0.ffn.experts.0.w1.weight": "torch.int8",
        "layers.0.ffn.gate.bias": "torch.float32",
        "layers.0.hc_attn_fn": "torch.float32",
    })  # fmt: skip
