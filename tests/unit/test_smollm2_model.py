"""The SmolLM2 build (`make test-model` builds it): the GGUF untouched, and a checkpoint derived from the same
weights that vLLM and the fidelity reference can load (no quantization_config, tied lm_head left out)."""

from __future__ import annotations

import json
import struct

import pytest

from frank.engine.models import smollm2, tiny_model


@pytest.fixture(scope="module")
def model_dir():
    path = smollm2.default_dir()
    problem = smollm2.check_build(path)
    assert problem is None, f"{problem} (run `make test-model`)"
    return path


def test_the_gguf_is_the_packages_own_bytes(model_dir):
    assert tiny_model.sha256_file(model_dir / smollm2.GGUF_NAME) == tiny_model.sha256_file(smollm2.source_gguf())


def test_the_checkpoint_config_is_loadable_without_the_gguf(model_dir):
    config = json.loads((model_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert "quantization_config" not in config and "_name_or_path" not in config
    assert config["tie_word_embeddings"] is True and config["vocab_size"] == 49152
    assert config["max_position_embeddings"] == 8192


def test_the_state_dict_leaves_the_tied_head_out(model_dir):
    with open(model_dir / "model.safetensors", "rb") as handle:
        size = struct.unpack("<Q", handle.read(8))[0]
        header = json.loads(handle.read(size))
    assert "lm_head.weight" not in header
    assert header["model.embed_tokens.weight"] == {**header["model.embed_tokens.weight"], "dtype": "F32"}
    assert header["model.embed_tokens.weight"]["shape"] == [49152, 576]
    assert sum(1 for name in header if name.endswith("self_attn.q_proj.weight")) == 30


def test_the_tokenizer_and_template_come_from_the_gguf(model_dir):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    assert tok.get_vocab_size() == 49152
    assert tok.token_to_id("<|im_start|>") == 1 and tok.token_to_id("<|im_end|>") == 2
    template = (model_dir / "chat_template.jinja").read_text()
    assert "<|im_start|>" in template and len(template.encode()) == 368
