"""Engine kinds: a llama.cpp profile becomes llama-server's flags (through xllamacpp on the CPU, or a
llama-server binary on the GPU), the token travels in LLAMA_API_KEY, and wrong profiles name their field."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from frank import paths
from frank.engine.kinds import build_launch, kind_of
from frank.engine.profiles import ProfileError, load_profile, load_profile_file

# what every launch's environment carries (frank.engine.multi_gpu), spelled out: the device notes' three
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def test_llamacpp_gpu_exact_command_line_and_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FRANK_LLAMA_SERVER", "/opt/llama.cpp/build/bin/llama-server")
    monkeypatch.setenv("FRANK_MODELS", str(tmp_path))
    prof = load_profile("llamacpp-gpu")
    spec = build_launch(prof, prof.default_knobs(), 8091, "TOKEN")
    assert spec.argv == [
        "/opt/llama.cpp/build/bin/llama-server",
        "--model",
        str(tmp_path / "tiny-frank.gguf"),
        "--alias",
        "tiny-frank",
        "--host",
        "127.0.0.1",
        "--port",
        "8091",
        "--metrics",
        "--jinja",
        "--ctx-size",
        "32768",
        "--parallel",
        "1",
        "--n-gpu-layers",  # the gpu_layers knob's (extra_args may not give a knob's flag too)
        "99",
        "--split-mode",  # the gpu_split knob's: GPU 0 only, also on a machine with two
        "none",
        "--main-gpu",
        "0",
    ]
    # the key is never in argv, where `ps` shows it; NVLink multicast stays off in every engine's environment
    assert spec.env == {"LLAMA_API_KEY": "TOKEN", **MULTICAST_OFF}
    assert "TOKEN" not in " ".join(spec.argv)
    assert spec.url == "http://127.0.0.1:8091"
    assert kind_of(prof).client_api_key(prof, "TOKEN") == "TOKEN"
    cpu_layers = build_launch(prof, prof.resolve_knobs({"gpu_layers": "0"}), 8091, "T").argv
    assert cpu_layers[cpu_layers.index("--n-gpu-layers") + 1] == "0" and cpu_layers.count("--n-gpu-layers") == 1


def test_llamacpp_gpu_smollm2_serves_the_cpu_profiles_gguf_with_yarn_on_the_gpu(monkeypatch, tmp_path):
    monkeypatch.setenv("FRANK_LLAMA_SERVER", "/opt/llama.cpp/build/bin/llama-server")
    monkeypatch.setenv("FRANK_MODELS", str(tmp_path))
    prof = load_profile("llamacpp-gpu-smollm2")
    spec = build_launch(prof, prof.default_knobs(), 8091, "TOKEN")
    template = str(paths.REPO_ROOT / "frank" / "engine" / "models" / "smollm2_tools.jinja")
    assert spec.argv == [
        "/opt/llama.cpp/build/bin/llama-server",
        "--model",
        str(tmp_path / "smollm2-135m" / "SmolLM2-135M-Instruct.Q4_1.gguf"),
        "--alias",
        "smollm2-135m",
        "--host",
        "127.0.0.1",
        "--port",
        "8091",
        "--metrics",
        "--jinja",
        "--ctx-size",
        "32768",
        "--parallel",
        "1",
        "--chat-template-file",
        template,
        "--n-gpu-layers",
        "99",
        "--rope-scaling",
        "yarn",
        "--rope-scale",
        "4",
        "--yarn-orig-ctx",
        "8192",
    ]
    assert spec.env == {"LLAMA_API_KEY": "TOKEN", **MULTICAST_OFF}
    assert prof.tool_calls == "schema"
    assert load_profile("llamacpp-cpu").model_path() == prof.model_path()  # the very file the CPU engine serves
    as_trained = build_launch(prof, prof.resolve_knobs({"context": "8192"}), 8091, "T").argv
    assert "--rope-scaling" not in as_trained and as_trained[as_trained.index("--ctx-size") + 1] == "8192"


def test_llamacpp_gpu_without_its_binary_variable_says_which(monkeypatch):
    monkeypatch.delenv("FRANK_LLAMA_SERVER", raising=False)
    prof = load_profile("llamacpp-gpu")
    with pytest.raises(ProfileError, match="llamacpp-gpu.toml: binary: the environment variable FRANK_LLAMA_SERVER"):
        build_launch(prof, prof.default_knobs(), 8091, "T")


def test_llamacpp_cpu_runs_xllamacpp_with_its_knobs():
    prof = load_profile("llamacpp-cpu")
    assert prof.kind == "llamacpp"
    spec = build_launch(prof, prof.resolve_knobs({"threads": "2", "speculative": "none", "cache_reuse": "0"}), 9, "K")
    assert spec.argv[:3] == [str(paths.llamacpp_venv_python()), "-m", "frank.engine.xllamacpp_server"]
    flags = dict(zip(spec.argv[3::2], spec.argv[4::2], strict=False))
    assert spec.argv[spec.argv.index("--threads") + 1] == "2"
    assert spec.argv[spec.argv.index("--spec-type") + 1] == "none"
    assert spec.argv[spec.argv.index("--cache-reuse") + 1] == "0"
    assert flags["--model"].endswith("smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf")
    assert spec.env["LLAMA_API_KEY"] == "K" and spec.env["PYTHONPATH"] == str(paths.REPO_ROOT)


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_llamacpp_cpu_holds_w01_mini_by_stretching_smollm2_with_yarn_and_says_so():
    """By default the one slot holds 32768 tokens, SmolLM2's trained 8192 stretched 4x by YaRN (W01 mini's
    prompts are up to 21.3K tokens); context = 8192 is the model as trained, with no RoPE scaling at all."""
    prof = load_profile("llamacpp-cpu")
    argv = build_launch(prof, prof.default_knobs(), 9, "K").argv
    assert argv.count("--ctx-size") == 1 and _flag(argv, "--ctx-size") == "32768"
    assert (_flag(argv, "--rope-scaling"), _flag(argv, "--rope-scale"), _flag(argv, "--yarn-orig-ctx")) == (
        "yarn",
        "4",
        "8192",
    )
    assert "not trained for" in prof.knobs["context"].description
    trained = build_launch(prof, prof.resolve_knobs({"context": "8192"}), 9, "K").argv
    assert _flag(trained, "--ctx-size") == "8192"
    assert not {"--rope-scaling", "--rope-scale", "--yarn-orig-ctx"} & set(trained)


def test_the_launcher_turns_yarn_flags_into_llamacpps_parameters():
    """The xllamacpp launcher sets what llama-server's flags of the same names set (run in the llama.cpp venv:
    the console's has no xllamacpp)."""
    code = (
        "from frank.engine.xllamacpp_server import parse_args, params_for;"
        "p = params_for(parse_args(['--model', 'm.gguf', '--port', '1', '-c', '32768', '--rope-scaling', 'yarn',"
        " '--rope-scale', '4', '--yarn-orig-ctx', '8192']));"
        "print(p.rope_scaling_type.name, p.rope_freq_scale, p.yarn_orig_ctx, p.n_ctx)"
    )
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT)}
    out = subprocess.run([str(paths.llamacpp_venv_python()), "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["LLAMA_ROPE_SCALING_TYPE_YARN", "0.25", "8192", "32768"]


def test_vllm_stays_the_default_kind():
    prof = load_profile("embedded-cpu")
    assert prof.kind == "vllm" and kind_of(prof).label == "vLLM"
    assert kind_of(prof).client_api_key(prof, "control-token") == ""  # vLLM's /v1 takes the profile's key


@pytest.mark.parametrize(
    "text, field",
    [
        ('kind = "tgi"\npython = "/p"', "kind: 'tgi' is not one of: vllm, llamacpp"),
        ('binary = "/b/llama-server"\npython = "/p"', "binary: only a llamacpp profile runs a binary"),
        ('kind = "llamacpp"\nbinary = "/b"\nspeculative_config = { method = "ngram" }', "speculative_config: vLLM's"),
        ('kind = "llamacpp"', "python: missing required field (or, for a llamacpp profile, binary)"),
    ],
)
def test_bad_llamacpp_profiles_name_file_and_field(tmp_path: Path, text: str, field: str):
    path = tmp_path / "mine.toml"
    path.write_text(f'name = "mine"\nmodel = "/m.gguf"\nserved_model_name = "m"\n{text}\n')
    with pytest.raises(ProfileError) as err:
        load_profile_file(path)
    assert str(path) in str(err.value) and field in str(err.value)


def test_the_xllamacpp_launcher_takes_llama_server_flag_names():
    from frank.engine.xllamacpp_server import parse_args

    args = parse_args(["--model", "m.gguf", "--port", "1", "--threads", "1", "--spec-type", "ngram-simple"])
    assert (args.model, args.port, args.threads, args.spec_type, args.ctx_size) == (
        "m.gguf",
        1,
        1,
        "ngram-simple",
        4096,
    )
    with pytest.raises(SystemExit):
        parse_args(["--model", "m.gguf", "--port", "1", "--spec-type", "eagle"])


def test_fidelity_on_llamacpp_compares_against_the_checkpoint_derived_from_its_gguf():
    """llama.cpp serves the GGUF; the reference is the float32 checkpoint `frank model build` derived from it,
    in the same folder, run in the engine venv (torch, transformers): the same reference vLLM's is."""
    from types import SimpleNamespace

    from frank.fidelity.runs import running_target

    status = SimpleNamespace(
        state="ready", profile="llamacpp-cpu", kind="llamacpp", url="http://127.0.0.1:1", knobs={"context": 8192}
    )
    target = running_target(SimpleNamespace(status=lambda: status, client_api_key="k"))
    assert target.kind == "llamacpp" and target.api_key == "k"
    assert target.model_dir == Path(load_profile("llamacpp-cpu").model_path()).parent
    assert target.model_dir == Path(load_profile("embedded-cpu-smollm2").model_path())
    assert target.python == paths.engine_venv_python()


def test_fidelity_on_a_gguf_without_its_checkpoint_says_what_is_missing(tmp_path):
    from frank.errors import FrankError
    from frank.fidelity.runs import reference_source

    path = tmp_path / "mine.toml"
    path.write_text(
        f'name = "mine"\nkind = "llamacpp"\npython = "/p"\nmodel = "{tmp_path}/m.gguf"\nserved_model_name = "m"\n'
    )
    prof = load_profile_file(path)
    with pytest.raises(FrankError, match=f"needs the Hugging Face checkpoint derived from m.gguf.*{tmp_path} has no"):
        reference_source(prof)


def _longest_w01_mini_prompt(tokenizer) -> tuple[int, int]:
    """(tokens, max_tokens) of the longest W01 mini request over all draws: its messages, tool calls and tool
    schemas tokenized as JSON text, which counts a little over what the chat template renders (18,915
    against llama.cpp's 18,880 for draw-1 on the H200, docs/gpu-run.md)."""
    import json

    from frank.workloads import w01

    longest, max_tokens = 0, 0
    for _draw, records in w01.generate("mini", 1):
        for rec in records:
            body = rec["body"]
            parts = [m.get("content") or "" for m in body["messages"]]
            parts += [json.dumps(tc) for m in body["messages"] for tc in m.get("tool_calls") or []]
            parts += [json.dumps(t) for t in body.get("tools") or []]
            n = len(tokenizer.encode("".join(map(str, parts)), add_special_tokens=False).ids)
            longest, max_tokens = max(longest, n), max(max_tokens, body.get("max_tokens") or 0)
    return longest, max_tokens


def test_llamacpp_gpu_context_holds_every_w01_mini_prompt(monkeypatch, tmp_path):
    """llama.cpp refuses a prompt longer than the slot's --ctx-size (HTTP 400): the GPU profile's default
    context must hold W01 mini's longest prompt with its answer, or `frank replay w01-mini` fails there."""
    import tokenizers

    from frank.engine.models import tiny_model

    model_dir = tiny_model.default_dir()
    if tiny_model.check_build(model_dir) is not None:
        tiny_model.build_via_engine_venv(model_dir)
    longest, max_tokens = _longest_w01_mini_prompt(tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json")))
    monkeypatch.setenv("FRANK_LLAMA_SERVER", "/opt/llama.cpp/build/bin/llama-server")
    prof = load_profile("llamacpp-gpu")
    argv = build_launch(prof, prof.default_knobs(), 8091, "T").argv
    context = int(argv[argv.index("--ctx-size") + 1])
    assert 15_000 < longest < context - max_tokens - 256, (longest, max_tokens, context)


@pytest.mark.parametrize(("name", "model"), [("embedded-gpu", "tiny-frank"), ("embedded-gpu-swa", "tiny-frank-swa")])
def test_embedded_gpu_exact_command_line_and_environment(monkeypatch, tmp_path, name, model):
    """vLLM's CUDA build (the GPU machine's python through FRANK_ENGINE_PYTHON), frank's middlewares, the
    sampler that needs no flashinfer, offline: what scripts/device_vllm_gpu.sh started on the H200 machine."""
    monkeypatch.setenv("FRANK_ENGINE_PYTHON", "/opt/torch/.venv/bin/python3")
    monkeypatch.setenv("FRANK_MODELS", str(tmp_path))
    prof = load_profile(name)
    spec = build_launch(prof, prof.default_knobs(), 8092, "TOKEN")
    assert spec.argv == [
        "/opt/torch/.venv/bin/python3", "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(tmp_path / model), "--served-model-name", model,
        "--host", "127.0.0.1", "--port", "8092", "--tensor-parallel-size", "1",
        "--dtype", "float32", "--max-model-len", "262144",
        "--enforce-eager", "--enable-prefix-caching", "--max-num-seqs", "4", "--gpu-memory-utilization", "0.25",
        "--enable-auto-tool-choice", "--tool-call-parser", "deepseek_v3",
        "--middleware", "frank.plugins.region_cache.control.ControlMiddleware",
        "--middleware", "frank.plugins.front_end.control.PartsControlMiddleware",
        "--enable-per-request-metrics", "--disable-access-log-for-endpoints", "/metrics,/health",
        "--max-logprobs", "64",
    ]  # fmt: skip
    assert spec.env == {
        "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false", "VLLM_USE_FLASHINFER_SAMPLER": "0", "FRANK_CONTROL_TOKEN": "TOKEN",
        "FRANK_REGION_CACHE": "off", "FRANK_DETOK_TAIL": "off", "FRANK_BLOCK_HASH_MEMO": "off",
        "FRANK_HELD_PROMPT": "off", **MULTICAST_OFF,
    }  # fmt: skip
    assert "TOKEN" not in " ".join(spec.argv) and spec.url == "http://127.0.0.1:8092"
    on = build_launch(prof, prof.resolve_knobs({"region_cache": "on", "detok_tail": "on"}), 8092, "T")
    assert on.env["FRANK_REGION_CACHE"] == "on" and on.env["FRANK_DETOK_TAIL"] == "on"


# -- two GPUs (docs/gpu-run.md, "Two GPUs"): what the two-GPU H200 machine would be given ----------------------


@pytest.mark.parametrize(("name", "model"), [("embedded-gpu", "tiny-frank"), ("embedded-gpu-swa", "tiny-frank-swa")])
def test_embedded_gpu_at_tensor_parallel_2(monkeypatch, tmp_path, name, model):
    """The gpus knob is vLLM's --tensor-parallel-size (a restart); over two GPUs the environment also turns
    vLLM's symmetric-memory all-reduce off, and keeps NVLink multicast off as every launch does."""
    from frank.engine.models import tiny_model

    monkeypatch.setenv("FRANK_ENGINE_PYTHON", "/opt/torch/.venv/bin/python3")
    monkeypatch.setenv("FRANK_MODELS", str(tmp_path))
    prof = load_profile(name)
    knob = prof.knobs["gpus"]
    assert (knob.values, knob.default, knob.needs_restart) == ((1, 2), 1, True)
    one = build_launch(prof, prof.default_knobs(), 8092, "T")
    two = build_launch(prof, prof.resolve_knobs({"gpus": "2"}), 8092, "T")
    assert two.argv.count("--tensor-parallel-size") == 1
    assert two.argv[two.argv.index("--tensor-parallel-size") + 1] == "2"
    # nothing else on the command line changes
    assert [a for a in two.argv if a != "2"] == [a for a in one.argv if a != "1"]
    assert two.env == {**one.env, "VLLM_ALLREDUCE_USE_SYMM_MEM": "0"}
    assert "VLLM_ALLREDUCE_USE_SYMM_MEM" not in one.env
    assert {k: two.env[k] for k in MULTICAST_OFF} == MULTICAST_OFF
    # vLLM shards attention by heads: the tiny models' heads divide by two
    config = tiny_model.spec_for(model).config
    assert config["num_attention_heads"] % 2 == 0 and config["num_key_value_heads"] % 2 == 0


def test_llamacpp_gpu_split_knob_over_two_gpus(monkeypatch, tmp_path):
    monkeypatch.setenv("FRANK_LLAMA_SERVER", "/opt/llama.cpp/build/bin/llama-server")
    monkeypatch.setenv("FRANK_MODELS", str(tmp_path))
    prof = load_profile("llamacpp-gpu")
    assert prof.knobs["gpu_split"].needs_restart and prof.knobs["gpu_split"].default == "none"
    tail = {
        value: build_launch(prof, prof.resolve_knobs({"gpu_split": value}), 8091, "T").argv[-8:]
        for value in ("none", "layer", "row")
    }
    assert tail["layer"] == [
        "--parallel",
        "1",
        "--n-gpu-layers",
        "99",
        "--split-mode",
        "layer",
        "--tensor-split",
        "1,1",
    ]
    assert tail["row"][-6:] == ["--split-mode", "row", "--tensor-split", "1,1", "--main-gpu", "0"]
    assert tail["none"][-4:] == ["--split-mode", "none", "--main-gpu", "0"]


def _gguf_header(path: Path, arch: str, block_count: int) -> Path:
    """A GGUF file of metadata only (no tensors), in GGUF v3's layout: what frank reads of a model's layers."""
    import struct

    def text(s: str) -> bytes:
        return struct.pack("<Q", len(s)) + s.encode()

    kv = text("general.architecture") + struct.pack("<I", 8) + text(arch)
    kv += text(f"{arch}.block_count") + struct.pack("<I", 4) + struct.pack("<I", block_count)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv)
    return path


# A profile of llamacpp-gpu-moe's shape with the knob values cut down (the shipped profile is the next
# test's); the layer count comes from the model's GGUF.
MOE_PROFILE = """
name = "moe2"
kind = "llamacpp"
binary = "/opt/llama.cpp/build/bin/llama-server"
model = "@models/frank-moe-gpu.gguf"
served_model_name = "frank-moe-gpu"
extra_args = ["--n-gpu-layers", "99", "--parallel", "1"]
[knobs.cpu_moe_layers]
values = [0, 4, 12]
default = 4
apply = "arg"
target = "--n-cpu-moe"
[knobs.gpu_split]
values = ["none", "layer", "row"]
default = "none"
apply = "arg"
target = "--split-mode"
[knobs.gpu_split.with_args]
none = ["--main-gpu", "0"]
layer = ["--tensor-split", "1,1"]
row = ["--tensor-split", "1,1", "--main-gpu", "0"]
"""


def test_the_cpu_expert_layers_of_a_moe_are_balanced_over_two_gpus(monkeypatch, tmp_path):
    monkeypatch.setenv("FRANK_MODELS", str(tmp_path))
    _gguf_header(tmp_path / "frank-moe-gpu.gguf", "deepseek4", 12)
    (tmp_path / "moe2.toml").write_text(MOE_PROFILE)
    prof = load_profile_file(tmp_path / "moe2.toml")
    one = build_launch(prof, prof.default_knobs(), 8093, "T").argv
    assert one[one.index("--n-cpu-moe") + 1] == "4" and "--override-tensor" not in one  # one GPU: as written
    two = build_launch(prof, prof.resolve_knobs({"gpu_split": "layer"}), 8093, "T").argv
    assert "--n-cpu-moe" not in two
    assert two[-6:] == [
        "--split-mode", "layer", "--tensor-split", "1,1",
        "--override-tensor", r"blk\.(0|1|7|8)\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU",
    ]  # fmt: skip
    row = build_launch(prof, prof.resolve_knobs({"gpu_split": "row"}), 8093, "T").argv
    assert row[row.index("--n-cpu-moe") + 1] == "4"  # a row split puts every layer on both GPUs
    every = build_launch(prof, prof.resolve_knobs({"gpu_split": "layer", "cpu_moe_layers": "12"}), 8093, "T").argv
    assert every[-1] == r"blk\.(0|1|2|3|4|5|6|7|8|9|10|11)\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU"
    # a model file that does not say its layer count: refused, naming the profile and the model
    (tmp_path / "frank-moe-gpu.gguf").write_bytes(b"not a gguf")
    with pytest.raises(ProfileError, match=r"moe2.toml: model: .*frank-moe-gpu.gguf is not a GGUF"):
        build_launch(prof, prof.resolve_knobs({"gpu_split": "layer"}), 8093, "T")


def test_the_shipped_gpu_moe_profile_balances_its_cpu_expert_layers_over_two_gpus(monkeypatch, tmp_path):
    monkeypatch.setenv("FRANK_MODELS", str(tmp_path))
    monkeypatch.setenv("FRANK_LLAMA_SERVER", "/opt/llama.cpp/build/bin/llama-server")
    (tmp_path / "frank-moe-gpu").mkdir()
    _gguf_header(tmp_path / "frank-moe-gpu" / "frank-moe-gpu.gguf", "deepseek4", 12)
    prof = load_profile("llamacpp-gpu-moe")
    two = build_launch(prof, prof.resolve_knobs({"gpu_split": "layer"}), 8093, "T").argv
    assert "--n-cpu-moe" not in two and two[two.index("--split-mode") + 1] == "layer"
    assert two[two.index("--override-tensor") + 1] == r"blk\.(0|1|7|8)\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU"
