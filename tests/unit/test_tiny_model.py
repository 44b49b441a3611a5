"""The tiny model builds deterministically, and its tokenizer carries the DeepSeek-style control tokens.

The build and the tokenizer probes run in the engine venv (tokenizers, torch, transformers live there); the
assertions run here. About 20 s in all: two real builds side by side (each a single-threaded engine-venv
process), then one probe.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from frank import paths
from frank.engine.models import tiny_model

# sha256 of manifest.json, which lists the sha256 of every file of the build. Update it (and bump
# tiny_model.BUILD_VERSION) only when the builder changes on purpose.
EXPECTED_MANIFEST_SHA256 = "9735f895e9f3e10d0ff44fb86574a84afe82a389b146c7303f59ffdaccd0b349"

ENGINE_PYTHON = paths.engine_venv_python()
needs_engine_venv = pytest.mark.skipif(not ENGINE_PYTHON.exists(), reason=f"no engine venv at {ENGINE_PYTHON}")


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The module's build and a forced second one in a folder of its own, side by side."""
    out = tmp_path_factory.mktemp("models") / "tiny-frank"
    again = tmp_path_factory.mktemp("again") / "tiny-frank"
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(tiny_model.build_via_engine_venv, out)
        second = pool.submit(tiny_model.build_via_engine_venv, again, True)
        assert first.result().built is True
        second.result()
    return out, again


@pytest.fixture(scope="module")
def built(builds: tuple[Path, Path]) -> Path:
    return builds[0]


@needs_engine_venv
def test_build_matches_committed_manifest(built: Path) -> None:
    assert tiny_model.check_build(built) is None
    assert tiny_model.manifest_digest(built) == EXPECTED_MANIFEST_SHA256
    manifest = tiny_model.read_manifest(built)
    assert manifest is not None and manifest["builder_version"] == tiny_model.BUILD_VERSION
    assert set(manifest["files"]) == {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    }


@needs_engine_venv
def test_two_builds_are_byte_identical(builds: tuple[Path, Path]) -> None:
    built, again = builds
    for name in tiny_model.read_manifest(built)["files"]:
        assert (again / name).read_bytes() == (built / name).read_bytes(), name
    assert not [p.name for p in again.parent.iterdir() if p.name.startswith(".")], "temp build dir left behind"


@needs_engine_venv
def test_second_build_is_skipped_and_cli_reports_it(built: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from frank.console.cli import main

    assert main(["model", "build", "--out", str(built), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["built"] is False and payload["reason"] == "up to date"
    assert payload["manifest_sha256"] == EXPECTED_MANIFEST_SHA256
    assert payload["path"] == str(built)


@needs_engine_venv
def test_damaged_or_stale_build_is_detected(built: Path, tmp_path: Path) -> None:
    copy = tmp_path / "tiny-frank"
    shutil.copytree(built, copy)
    with (copy / "config.json").open("a") as handle:
        handle.write(" ")
    assert "config.json: sha256 differs" in tiny_model.check_build(copy)

    manifest = json.loads((built / tiny_model.MANIFEST).read_text())
    shutil.copy(built / "config.json", copy / "config.json")
    manifest["builder_version"] = "tiny-frank-0"
    (copy / tiny_model.MANIFEST).write_text(json.dumps(manifest))
    assert "builder_version" in tiny_model.check_build(copy)
    (copy / "tokenizer.json").unlink()
    (copy / tiny_model.MANIFEST).write_text(json.dumps(dict(manifest, builder_version=tiny_model.BUILD_VERSION)))
    assert tiny_model.check_build(copy).endswith("tokenizer.json: missing")


def test_missing_engine_python_is_a_clear_error(tmp_path: Path) -> None:
    from frank.errors import FrankError

    with pytest.raises(FrankError, match="engine python .* not found"):
        tiny_model.build_via_engine_venv(tmp_path / "m", python=tmp_path / "no-python")


# Runs in the engine venv: HF tokenizer (transformers), the Jinja template, and vLLM's own DeepSeek-V4.1
# prompt encoder (loaded from its file so that importing vllm's heavy package is not needed).
PROBE = r"""
import importlib.util, json, os, sys
from pathlib import Path
from transformers import AutoTokenizer

model_dir, text, convo = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
tok = AutoTokenizer.from_pretrained(model_dir)
enc_path = Path(importlib.util.find_spec("vllm").origin).parent / "tokenizers" / "deepseek_v41_encoding.py"
spec = importlib.util.spec_from_file_location("dsv41_encoding", enc_path)
dsv41 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dsv41)

text_ids = tok.encode(text, add_special_tokens=False)
hf_text = tok.apply_chat_template(convo["messages"], tools=convo["tools"], tokenize=False, add_generation_prompt=True)
hf_ids = tok.apply_chat_template(convo["messages"], tools=convo["tools"], tokenize=True, add_generation_prompt=True,
                                 return_dict=False)
system = dict(convo["messages"][0], tools=convo["tools"])
v41_text = dsv41.encode_messages([system] + convo["messages"][1:], thinking_mode="thinking", reasoning_effort="high")
print(json.dumps({
    "vocab_size": len(tok),
    "text_ids": text_ids,
    "decoded": tok.decode(text_ids),
    "with_special": tok.encode("x"),
    "control_ids": {t: tok.encode(t, add_special_tokens=False) for t in convo["control_tokens"]},
    "v41_tokens": {"bos": dsv41.bos_token, "eos": dsv41.eos_token, "user": dsv41.USER_SP_TOKEN,
                   "assistant": dsv41.ASSISTANT_SP_TOKEN, "system": dsv41.SYSTEM_SP_TOKEN,
                   "think": dsv41.thinking_start_token, "think_end": dsv41.thinking_end_token,
                   "reminder": dsv41.LATEST_REMINDER_SP_TOKEN, "image": dsv41.IMAGE_PLACEHOLDER,
                   "tasks": list(dsv41.DS_TASK_SP_TOKENS.values())},
    "hf_text": hf_text, "hf_ids": list(hf_ids),
    "v41_text": v41_text, "v41_ids": tok.encode(v41_text, add_special_tokens=False),
}))
"""

UNICODE_TEXT = "naïve café — 中文 日本語 한국어 🚀🧪 \t def f(x):\n    return {'µs': ±0.5}\r\n\u200b\U0010ffff"
CONVERSATION = {
    "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "List src/."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "run_shell", "arguments": json.dumps({"command": "ls src"})},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": {"path": "src/a.py"}},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
        {"role": "tool", "tool_call_id": "call_2", "content": "print('héllo')"},
        {"role": "user", "content": "Thanks."},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "run_shell",
                "description": "run a command",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            },
        }
    ],
    "control_tokens": list(tiny_model.CONTROL_TOKENS),
}


@pytest.fixture(scope="module")
def probe(built: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(paths.REPO_ROOT), TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run(
        [str(ENGINE_PYTHON), "-c", PROBE, str(built), UNICODE_TEXT, json.dumps(CONVERSATION)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@needs_engine_venv
def test_unicode_round_trips_and_bos_is_added(probe: dict) -> None:
    assert probe["vocab_size"] == tiny_model.VOCAB_SIZE
    assert probe["decoded"] == UNICODE_TEXT
    assert len(probe["text_ids"]) < len(UNICODE_TEXT.encode()), "BPE merged nothing"
    assert probe["with_special"][0] == 0 and len(probe["with_special"]) == 2  # BOS + "x"


@needs_engine_venv
def test_control_tokens_are_single_distinct_tokens(probe: dict) -> None:
    ids = probe["control_ids"]
    assert all(len(v) == 1 for v in ids.values()), {k: v for k, v in ids.items() if len(v) != 1}
    assert len({v[0] for v in ids.values()}) == len(ids)
    # Every control token that vLLM's DeepSeek-V4.1 encoder emits is one of ours.
    v41 = probe["v41_tokens"]
    emitted = [
        v41[k] for k in ("bos", "eos", "user", "assistant", "system", "think", "think_end", "reminder", "image")
    ] + v41["tasks"]
    assert set(emitted) <= set(ids), set(emitted) - set(ids)


def _count(ids: list[int], token_id: int) -> int:
    return sum(1 for i in ids if i == token_id)


@needs_engine_venv
def test_hf_chat_template_renders_tools_and_cuts_at_control_tokens(probe: dict) -> None:
    text, ids, cid = probe["hf_text"], probe["hf_ids"], {k: v[0] for k, v in probe["control_ids"].items()}
    assert text.startswith(tiny_model.BOS + "<｜System｜>You are a coding agent.")
    assert '"name": "run_shell"' in text  # the tool schema
    assert '<｜tool▁sep｜>run_shell\n```json\n{"command": "ls src"}\n```' in text
    assert '<｜tool▁sep｜>read_file\n```json\n{"path": "src/a.py"}\n```' in text  # dict arguments
    assert "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>a.py\nb.py<｜tool▁output▁end｜>" in text
    assert text.endswith("<｜tool▁outputs▁end｜><｜User｜>Thanks.<｜Assistant｜></think>")
    assert ids[0] == cid[tiny_model.BOS] and _count(ids, cid[tiny_model.BOS]) == 1
    expected = {
        "<｜User｜>": 2,
        "<｜Assistant｜>": 2,
        "<｜tool▁calls▁begin｜>": 1,
        "<｜tool▁call▁begin｜>": 2,
        "<｜tool▁sep｜>": 2,
        "<｜tool▁call▁end｜>": 2,
        "<｜tool▁calls▁end｜>": 1,
        "<｜end▁of▁sentence｜>": 1,
        "<｜tool▁outputs▁begin｜>": 1,
        "<｜tool▁output▁begin｜>": 2,
        "<｜tool▁output▁end｜>": 2,
        "<｜tool▁outputs▁end｜>": 1,
    }
    # The tools preamble mentions <｜tool▁calls▁begin｜> once as text: it is a control token there too.
    expected["<｜tool▁calls▁begin｜>"] += 1
    assert {t: _count(ids, cid[t]) for t in expected} == expected


@needs_engine_venv
def test_deepseek_v41_rendering_tokenizes_control_tokens_as_single_ids(probe: dict) -> None:
    text, ids, cid = probe["v41_text"], probe["v41_ids"], {k: v[0] for k, v in probe["control_ids"].items()}
    assert "<tool_result>a.py\nb.py</tool_result>" in text and "<｜DSML｜ calls>" in text
    for token in (
        tiny_model.BOS,
        "<｜System｜>",
        "<｜User｜>",
        "<｜Assistant｜>",
        "<think>",
        "</think>",
        "<｜DSML｜ calls>",
        "</｜DSML｜ calls>",
        "<tool_result>",
        "</tool_result>",
    ):
        assert _count(ids, cid[token]) == text.count(token) > 0, token
    assert ids[0] == cid[tiny_model.BOS] and ids[-1] == cid["<think>"]
