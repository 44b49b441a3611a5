"""The CPU-expert profiles' command lines, pinned without an engine: the seed's knobs on llama.cpp's flags
(docs/measures.md maps each to its `frankenstein` twin), and the xllamacpp launcher taking the same flags."""

from __future__ import annotations

import pytest

from frank.engine.kinds.llamacpp import build_launch
from frank.engine.profiles import ProfileError, load_profile
from tests.unit.test_engine_kinds import MULTICAST_OFF


def _flag(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_gpu_moe_exact_command_line(monkeypatch, tmp_path):
    monkeypatch.setenv("FRANK_LLAMA_SERVER", "/opt/llama.cpp/build/bin/llama-server")
    monkeypatch.setenv("FRANK_MODELS", str(tmp_path))
    prof = load_profile("llamacpp-gpu-moe")
    spec = build_launch(prof, prof.default_knobs(), 8091, "TOKEN")
    assert spec.argv == [
        "/opt/llama.cpp/build/bin/llama-server",
        "--model", str(tmp_path / "frank-moe-gpu" / "frank-moe-gpu.gguf"),
        "--alias", "frank-moe-gpu",
        "--host", "127.0.0.1",
        "--port", "8091",
        "--metrics",
        "--jinja",
        "--ctx-size", "32768",
        "--n-gpu-layers", "99",
        "--parallel", "1",
        "--spec-draft-model", str(tmp_path / "frank-moe-gpu" / "frank-moe-gpu-dspark.gguf"),
        "--spec-draft-n-max", "3",
        "--spec-draft-ngl", "99",
        "--spec-type", "draft-dspark",
        "--n-cpu-moe", "4",  # a third of the 12 layers
        "--cpu-strict-batch", "1",  # schedule 2: the batch threads pinned one per core
        "--cpu-range-batch", "0-511",
        "--threads", "16",
        "--threads-batch", "16",
        "--split-mode", "none",  # gpu_split: GPU 0 only, also on a machine with two
        "--main-gpu", "0",
        "--poll", "0",  # cpu_poll: the pool sleeps when idle
        "--poll-batch", "0",
        "--prio", "0",  # cpu_prio: normal priority
        "--prio-batch", "0",
        "--cpu-strict", "0",  # cpu_strict: the single-token pool placed by the kernel
    ]  # fmt: skip
    assert spec.env == {"LLAMA_API_KEY": "TOKEN", "OMP_WAIT_POLICY": "PASSIVE", **MULTICAST_OFF}


@pytest.mark.parametrize("profile", ["llamacpp-cpu-moe", "llamacpp-gpu-moe"])
def test_the_seeds_knobs_on_llamacpps_flags(monkeypatch, tmp_path, profile):
    monkeypatch.setenv("FRANK_LLAMA_SERVER", "/opt/llama-server")
    monkeypatch.setenv("FRANK_MODELS", str(tmp_path))
    prof = load_profile(profile)
    layers = max(prof.knobs["cpu_moe_layers"].values)
    assert prof.knobs["cpu_moe_layers"].default == layers // 3  # a third of the layers' experts
    sched1 = build_launch(prof, prof.resolve_knobs({"cpu_experts_sched": 1}), 1, "T").argv
    sched2 = build_launch(prof, prof.resolve_knobs({"cpu_experts_sched": 2}), 1, "T").argv
    assert _flag(sched1, "--cpu-strict-batch") == "0" and "--cpu-range-batch" not in sched1
    assert _flag(sched2, "--cpu-strict-batch") == "1" and _flag(sched2, "--cpu-range-batch") == "0-511"
    assert sched1.count("--cpu-strict-batch") == sched2.count("--cpu-strict-batch") == 1
    # both schedules keep the pool asleep when idle: the CPU-expert wait reads a worker's CPU time
    for argv in (sched1, sched2):
        assert _flag(argv, "--poll") == "0" and _flag(argv, "--poll-batch") == "0"
    none = build_launch(prof, prof.resolve_knobs({"cpu_moe_layers": 0, "speculative": "none"}), 1, "T").argv
    assert _flag(none, "--n-cpu-moe") == "0" and _flag(none, "--spec-type") == "none"
    threads = min(prof.knobs["cpu_threads"].values)
    argv = build_launch(prof, prof.resolve_knobs({"cpu_threads": threads}), 1, "T").argv
    assert _flag(argv, "--threads") == _flag(argv, "--threads-batch") == str(threads)
    with pytest.raises(ProfileError, match="cpu_experts_sched"):
        prof.resolve_knobs({"cpu_experts_sched": 3})


def test_the_cpu_profile_runs_the_launcher_with_the_draft(monkeypatch, tmp_path):
    monkeypatch.setenv("FRANK_MODELS", str(tmp_path))
    prof = load_profile("llamacpp-cpu-moe")
    spec = build_launch(prof, prof.default_knobs(), 8091, "TOKEN")
    assert spec.argv[1:3] == ["-m", "frank.engine.xllamacpp_server"]
    assert _flag(spec.argv, "--model") == str(tmp_path / "tiny-frank-moe" / "tiny-frank-moe.gguf")
    assert _flag(spec.argv, "--spec-draft-model") == str(tmp_path / "tiny-frank-moe" / "tiny-frank-moe-dspark.gguf")
    assert _flag(spec.argv, "--spec-type") == "draft-dspark" and _flag(spec.argv, "--n-cpu-moe") == "2"
    assert spec.env["OMP_WAIT_POLICY"] == "PASSIVE"  # the wheel's pool is OpenMP's


def test_the_launcher_parses_every_flag_the_profiles_give():
    from frank.engine.xllamacpp_server import parse_args

    prof = load_profile("llamacpp-cpu-moe")
    argv = build_launch(prof, prof.resolve_knobs({"cpu_experts_sched": 2}), 8091, "T").argv
    args = parse_args(argv[3:])
    assert (args.threads, args.threads_batch, args.poll, args.poll_batch) == (2, 2, 0, 0)
    assert (args.cpu_strict_batch, args.cpu_range_batch, args.n_cpu_moe) == (1, "0-511", 2)
    # the single-token pool's own flags are never read as the batch pool's (no abbreviations)
    assert (args.cpu_strict, args.prio, args.prio_batch) == (0, 0, 0)
    other = parse_args([*argv[3:], "--cpu-strict", "1", "--prio", "2"])
    assert (other.cpu_strict, other.cpu_strict_batch, other.prio, other.prio_batch) == (1, 1, 2, 0)
    assert args.spec_type == "draft-dspark" and args.spec_draft_model.endswith("tiny-frank-moe-dspark.gguf")
    with pytest.raises(SystemExit):
        parse_args([*argv[3:], "--cpu-strict-batch", "2"])  # llama-server's 0|1, no other value


@pytest.mark.parametrize("profile", ["llamacpp-cpu-moe", "llamacpp-gpu-moe"])
def test_the_pool_settings_a_screen_tries_set_both_pools_once(monkeypatch, tmp_path, profile):
    monkeypatch.setenv("FRANK_LLAMA_SERVER", "/opt/llama-server")
    monkeypatch.setenv("FRANK_MODELS", str(tmp_path))
    prof = load_profile(profile)
    argv = build_launch(prof, prof.resolve_knobs({"cpu_poll": 50, "cpu_prio": 2, "cpu_strict": 1}), 1, "T").argv
    assert _flag(argv, "--poll") == _flag(argv, "--poll-batch") == "50"
    assert _flag(argv, "--prio") == _flag(argv, "--prio-batch") == "2"
    assert _flag(argv, "--cpu-strict") == "1"
    for flag in ("--poll", "--poll-batch", "--prio", "--prio-batch", "--cpu-strict"):
        assert argv.count(flag) == 1, flag
