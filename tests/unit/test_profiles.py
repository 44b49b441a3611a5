"""Profiles and knobs: validation names the file and the field; launch specs are exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frank.engine.kinds import build_launch
from frank.engine.profiles import ProfileError, list_profiles, load_profile, load_profile_file

GOOD = """
name = "mine"
python = "/usr/bin/python3"
model = "/models/x"
served_model_name = "x"
port = 8123
[knobs.sched]
values = [1, 2]
default = 1
apply = "env"
target = "SCHED"
"""

ARG = GOOD.replace("[knobs.sched]", "[knobs.ctx]").replace('apply = "env"', 'apply = "arg"')
ARG = ARG.replace('target = "SCHED"', 'target = "--ctx"')


def write(tmp_path: Path, text: str, name: str = "mine") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_builtin_profiles_load():
    names = {p.name for p in list_profiles() if not isinstance(p, Exception)}
    assert {"embedded-cpu", "frankenstein"} <= names


def test_frankenstein_exact_command_line_and_environment():
    prof = load_profile("frankenstein")
    spec = build_launch(prof, prof.resolve_knobs({"cpu_experts_sched": "1"}), 8000, "TOKEN")
    assert spec.argv == [
        "/opt/frankenstein/venv/bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/models/DeepSeek-V4.1-Flash-1017-EXL3-3.0bpw",
        "--served-model-name",
        "deepseek-v4.1-flash",
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--tensor-parallel-size",
        "2",
        "--quantization",
        "exl3",
        "--dtype",
        "bfloat16",
        "--max-model-len",
        "196608",
        "--speculative-config",
        '{"method":"dspark","model":"/models/DeepSeek-V4.1-Flash-1017-DSpark","num_speculative_tokens":3}',
        "--engram-config",
        '{"path":"/models/DeepSeek-V4.1-Flash-1017-Engram-int4","dtype":"int4"}',
        "--enable-prefix-caching",
        "--max-num-seqs",
        "1",
        "--gpu-memory-utilization",
        "0.94",
        "--tokenizer-mode",
        "deepseek_v41",
        "--middleware",
        "frank.plugins.region_cache.control.ControlMiddleware",
        "--middleware",
        "frank.plugins.front_end.control.PartsControlMiddleware",
        "--disable-access-log-for-endpoints",
        "/metrics,/health",
    ]
    assert spec.env == {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        "VLLM_NO_USAGE_STATS": "1",
        # exllamav3 1.6.5's CPU-expert names (scripts/check_exl3_names.py checks them against the wheel)
        "EXL3_MOE_HOST_CORES": "1",
        "EXL3_MOE_CPU_SWAP": "1",
        "OMP_NUM_THREADS": "64",
        "EXL3_CPU_EXPERTS_SCHED": "1",  # the seed runtime's own variable, not exllamav3's
        "EXL3_MOE_CPU_SPLIT": "85",  # a third of DeepSeek-V4's 256 routed experts per layer
        "EXL3_MOE_CPU_THREADS": "63",
        "FRANK_REGION_CACHE": "off",
        "FRANK_DETOK_TAIL": "off",
        "FRANK_BLOCK_HASH_MEMO": "off",
        "FRANK_HELD_PROMPT": "off",
        "FRANK_CONTROL_TOKEN": "TOKEN",
        # tensor parallel 2: vLLM's symmetric-memory all-reduce off, and NVLink multicast off as in every launch
        "VLLM_ALLREDUCE_USE_SYMM_MEM": "0",
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
    }
    # the default schedule is the served one (schedule 2 since 1 November)
    assert build_launch(prof, prof.default_knobs(), 8000, "T").env["EXL3_CPU_EXPERTS_SCHED"] == "2"
    # the split size and the thread count are restart knobs
    tuned = build_launch(prof, prof.resolve_knobs({"cpu_split": "128", "cpu_threads": "48"}), 8000, "T").env
    assert (tuned["EXL3_MOE_CPU_SPLIT"], tuned["EXL3_MOE_CPU_THREADS"]) == ("128", "48")
    assert prof.knobs["cpu_split"].needs_restart and prof.knobs["cpu_threads"].needs_restart


def test_exl3_name_checker_finds_names_a_wheel_does_not_read(tmp_path):
    import zipfile

    from scripts.check_exl3_names import check

    wheel = tmp_path / "exllamav3-0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:  # the literals exllamav3 1.6.5 reads, minus EXL3_MOE_CPU_SWAP
        zf.writestr("exllamav3/model/config.py", 'int(os.environ.get("EXL3_MOE_CPU_SPLIT", 0))')
        zf.writestr(
            "exllamav3/model/moe_cpu_host.py",
            "os.environ.get('EXL3_MOE_HOST_CORES', 1)\nos.environ.get('EXL3_MOE_CPU_THREADS')",
        )
    lines, ok = check(wheel, [load_profile("frankenstein")])
    assert not ok and [ln for ln in lines if ln.startswith("UNKNOWN")] == [
        "UNKNOWN  frankenstein: EXL3_MOE_CPU_SWAP (env) is not read anywhere in exllamav3-0-py3-none-any.whl"
    ]
    assert any(ln.startswith("elsewhere frankenstein: EXL3_CPU_EXPERTS_SCHED") for ln in lines)


def test_embedded_profile_binds_loopback_and_spec_knob_changes_spec_config():
    prof = load_profile("embedded-cpu")
    assert prof.host == "127.0.0.1"
    spec = build_launch(prof, prof.resolve_knobs({"num_speculative_tokens": "2", "region_cache": "on"}), 9000, "T")
    config = json.loads(spec.argv[spec.argv.index("--speculative-config") + 1])
    assert config == {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    assert spec.env["FRANK_REGION_CACHE"] == "on"
    assert "--enable-prefix-caching" in spec.argv
    assert prof.knobs["region_cache"].needs_restart is False
    assert prof.knobs["num_speculative_tokens"].needs_restart is True


def test_good_user_profile(tmp_path):
    prof = load_profile_file(write(tmp_path, GOOD))
    assert prof.knobs["sched"].parse("2") == 2
    assert build_launch(prof, prof.default_knobs(), 8123, "t").env["SCHED"] == "1"


@pytest.mark.parametrize(
    "text, field",
    [
        ('name = "mine"\npython = [', "invalid TOML"),
        (GOOD.replace('served_model_name = "x"\n', ""), "served_model_name: missing required field"),
        (GOOD.replace("port = 8123", 'port = "eight"'), 'port: expected an integer or "auto"'),
        (GOOD.replace("port = 8123", "port = 70000"), "port: 70000 is out of range"),
        (GOOD + "colour = 3\n", "colour: unknown field"),
        (GOOD.replace("default = 1", "default = 3"), "knobs.sched.default: 3 is not one of the values"),
        (GOOD.replace('apply = "env"', 'apply = "magic"'), "knobs.sched.apply: 'magic' is not one of"),
        (GOOD.replace('apply = "env"', 'apply = "arg"'), "knobs.sched.target: an arg knob targets"),
        (GOOD.replace("values = [1, 2]", "values = []"), "knobs.sched.values: must list at least 1 value"),
        (GOOD.replace('target = "SCHED"', ""), "knobs.sched.target: missing required field"),
        (GOOD.replace('name = "mine"', 'name = "other"'), "name: 'other' must match the file name"),
        (GOOD + 'with_args = { "1" = ["--x", "1"] }\n', "knobs.sched.with_args: only a knob that sets a --flag"),
        (ARG + 'with_args = { "3" = ["--x", "1"] }\n', "knobs.ctx.with_args.3: '3' is not one of the values"),
        (ARG + 'with_args = { "2" = ["--x"] }\n', 'knobs.ctx.with_args.2: expected pairs of "--flag", "value"'),
        (ARG + 'with_args = { "2" = ["x", "1"] }\n', 'knobs.ctx.with_args.2: expected pairs of "--flag", "value"'),
        (ARG + 'with_env = { "1" = { X = "1" } }\n', "knobs.ctx.with_env: only an env knob can set more"),
        (GOOD + 'with_env = { "3" = { X = "1" } }\n', "knobs.sched.with_env.3: '3' is not one of the values"),
        (GOOD + 'with_env = { "1" = { "X Y" = "1" } }\n', "knobs.sched.with_env.1: 'X Y' is not an environment"),
        (GOOD + 'with_env = { "1" = { X = 1 } }\n', "knobs.sched.with_env.1.X: expected a string, got 1"),
        (GOOD + 'with_env = { "2" = { NCCL_NVLS_ENABLE = "1" } }\n', "knobs.sched.with_env.2: a knob may not set"),
        (GOOD.replace("port = 8123", 'port = 8123\ntool_calls = "guess"'), "tool_calls: 'guess' is not one of"),
        (GOOD.replace("port = 8123", "port = 8123\ntool_calls = true"), "tool_calls: expected a string"),
        # NVLink multicast stays off: a profile or knob that turns it on is refused, not silently overridden
        (GOOD + '[env]\nNCCL_NVLS_ENABLE = "1"\n', "env.NCCL_NVLS_ENABLE: NCCL_NVLS_ENABLE = '1': NVLink multicast"),
        (GOOD + "[env]\nNVSHMEM_DISABLE_NVLS = 0\n", "env.NVSHMEM_DISABLE_NVLS: NVSHMEM_DISABLE_NVLS = 0"),
        (GOOD.replace('target = "SCHED"', 'target = "NCCL_NVLS_ENABLE"'), "knobs.sched.target: a knob may not set"),
        (
            GOOD.replace('apply = "env"', 'apply = "live"') + 'env = "TORCH_SYMM_MEM_DISABLE_MULTICAST"\n',
            "knobs.sched.env: a knob may not set TORCH_SYMM_MEM_DISABLE_MULTICAST",
        ),
    ],
)
def test_bad_profile_names_file_and_field(tmp_path, text, field):
    path = write(tmp_path, text)
    with pytest.raises(ProfileError) as err:
        load_profile_file(path)
    assert str(path) in str(err.value)
    assert field in str(err.value)


def test_a_knob_value_brings_its_own_flags_and_only_that_value(tmp_path):
    prof = load_profile_file(write(tmp_path, ARG + 'with_args = { "2" = ["--scale", "4", "--orig", "8"] }\n'))
    assert build_launch(prof, {"ctx": 1}, 8123, "t").argv[-2:] == ["--ctx", "1"]
    assert build_launch(prof, {"ctx": 2}, 8123, "t").argv[-6:] == ["--ctx", "2", "--scale", "4", "--orig", "8"]


def test_an_env_knob_value_sets_its_own_variables_and_only_that_value(tmp_path):
    # a named value gives its target a value of its own (cpu_experts_sched 1 | 2 -> EXL3_MOE_CPU_PIN 0 | 1)
    prof = load_profile_file(write(tmp_path, GOOD + 'with_env = { "1" = { SCHED = "0", MORE = "x" } }\n'))
    assert {k: v for k, v in build_launch(prof, {"sched": 1}, 8123, "t").env.items() if k in ("SCHED", "MORE")} == {
        "SCHED": "0",
        "MORE": "x",
    }
    env = build_launch(prof, {"sched": 2}, 8123, "t").env
    assert env["SCHED"] == "2" and "MORE" not in env


def test_tool_call_mode_is_declared_by_the_profile_and_native_by_default(tmp_path):
    assert load_profile_file(write(tmp_path, GOOD)).tool_calls == "native"
    assert load_profile("embedded-cpu").tool_calls == "native"
    # SmolLM2 answers in prose when offered tools: both of its engines constrain the calls
    assert load_profile("embedded-cpu-smollm2").tool_calls == load_profile("llamacpp-cpu").tool_calls == "schema"


def test_unknown_knob_and_bad_value_are_named():
    prof = load_profile("embedded-cpu")
    with pytest.raises(ProfileError, match="unknown knob 'nope'"):
        prof.resolve_knobs({"nope": 1})
    with pytest.raises(ProfileError, match="knob num_speculative_tokens: '3' is not one of: 1, 2, 4, 8"):
        prof.resolve_knobs({"num_speculative_tokens": "3"})


def test_user_profile_overrides_builtin_and_bad_one_is_reported(fresh_frank_home):
    from frank import paths

    user_dir = paths.user_profiles_dir()
    user_dir.mkdir(parents=True)
    (user_dir / "broken.toml").write_text('name = "broken"\n')
    entries = list_profiles()
    errors = [e for e in entries if isinstance(e, ProfileError)]
    assert len(errors) == 1 and "broken.toml: python: missing required field" in str(errors[0])
    with pytest.raises(ProfileError, match="no profile named 'absent'"):
        load_profile("absent")
