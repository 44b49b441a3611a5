"""SmolLM2-135M widened to exllamav3's 128-wide blocks (frank.engine.models.exl3_widen): the shapes it picks,
what it refuses, and, on the real checkpoint in the engine venv, that the widened model is the same function
(float32, as the fidelity reference runs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from frank import paths
from frank.engine.models.exl3_widen import widened_shape

REPO = Path(__file__).resolve().parents[2]
SMOLLM2 = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 576,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "intermediate_size": 1536,
}


def test_smollm2s_widths_become_multiples_of_128_with_its_head_grouping_kept():
    wide = widened_shape(SMOLLM2)
    assert wide == {
        "hidden_size": 768,  # 640 is the next multiple of 128, but 12 query heads must divide it
        "num_attention_heads": 12,  # 3 query heads per key/value head, as before
        "num_key_value_heads": 4,  # 4 x 64 = 256
        "head_dim": 64,
        "intermediate_size": 1536,
    }
    for width in (wide["hidden_size"], wide["num_attention_heads"] * 64, wide["num_key_value_heads"] * 64):
        assert width % 128 == 0


def test_a_model_already_in_128_wide_blocks_is_left_as_it_is():
    qwen_like = {**SMOLLM2, "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 8,
                 "head_dim": 128, "intermediate_size": 3072}  # fmt: skip
    assert widened_shape(qwen_like) == {k: qwen_like[k] for k in widened_shape(qwen_like)}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"architectures": ["Qwen3MoeForCausalLM"]}, "architectures: 'Qwen3MoeForCausalLM' is not one of"),
        ({"num_key_value_heads": 2}, "num_attention_heads 9 is not a multiple of num_key_value_heads 2"),
    ],
)
def test_what_the_widening_cannot_keep_the_same_is_refused_with_its_field(change, message):
    with pytest.raises(ValueError, match=message):
        widened_shape({**SMOLLM2, **change})


SMOLLM2_DIR = Path(os.environ["FRANK_MODELS"]) / "smollm2-135m"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def widen_module(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    """python -m frank.engine.models.exl3_widen ARGS in the engine venv (torch, transformers)."""
    py = str(paths.engine_venv_python())
    return subprocess.run([py, "-m", "frank.engine.models.exl3_widen", *args], capture_output=True, text=True,
                          env=ENV, **kwargs)  # fmt: skip


@pytest.fixture(scope="module")
def widened(tmp_path_factory) -> Path:
    assert (SMOLLM2_DIR / "model.safetensors").is_file(), f"{SMOLLM2_DIR}: `make test-model` builds it"
    wide = tmp_path_factory.mktemp("smollm2") / "wide"
    made = widen_module("widen", str(SMOLLM2_DIR), str(wide))
    assert made.returncode == 0, made.stderr
    return wide


def test_the_widened_smollm2_is_the_same_function_in_float32(widened):
    config = json.loads((widened / "config.json").read_text())
    assert (config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"]) == (768, 12, 4)
    source_eps = json.loads((SMOLLM2_DIR / "config.json").read_text())["rms_norm_eps"]
    assert config["rms_norm_eps"] == pytest.approx(source_eps * 576 / 768)
    assert (widened / "tokenizer.json").read_bytes() == (SMOLLM2_DIR / "tokenizer.json").read_bytes()
    checked = widen_module("check", str(SMOLLM2_DIR), str(widened))
    assert checked.returncode == 0, checked.stderr
    result = json.loads(checked.stdout)
    assert result["tokens"] > 50 and result["same_argmax"]
    # float32 rounding of the rescaled norm weights is all that differs: quantization's KL is 1e-3 and up
    assert result["max_kl"] < 1e-8, result


def test_a_wrong_norm_scale_is_caught_by_the_check(widened, tmp_path):
    """The check can fail: the widened model with its norms' weights put back unscaled is another function."""
    wrong = tmp_path / "wrong"
    shutil.copytree(widened, wrong)
    unscale = (
        "import sys; from safetensors.torch import load_file, save_file; f = sys.argv[1]; t = load_file(f);"
        " save_file({k: v / (576 / 768) ** 0.5 if k.endswith('norm.weight') else v for k, v in t.items()}, f)"
    )
    subprocess.run([str(paths.engine_venv_python()), "-c", unscale, str(wrong / "model.safetensors")], check=True)
    checked = widen_module("check", str(SMOLLM2_DIR), str(wrong))
    assert json.loads(checked.stdout)["max_kl"] > 1e-4
    assert checked.returncode == 1 and "is not the same function" in checked.stderr, checked.stderr
