"""SmolLM2-135M widened to exllamav3's 128-wide blocks (frank.engine.models.exl3_widen): the shapes it picks,
what it refuses, and, on the real checkpoint in the engine venv, that the widened model is the same function
(float32, as the fidelity reference runs)."""

from __future__ import annotations

import json
import os
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


def test_the_widened_smollm2_is_the_same_function_in_float32(tmp_path):
    src = Path(os.environ["FRANK_MODELS"]) / "smollm2-135m"
    assert (src / "model.safetensors").is_file(), f"{src}: `make test-model` builds SmolLM2's checkpoint"
    py, env = str(paths.engine_venv_python()), {**os.environ, "PYTHONPATH": str(REPO)}
    module = [py, "-m", "frank.engine.models.exl3_widen"]
    wide = tmp_path / "wide"
    made = subprocess.run([*module, "widen", str(src), str(wide)], capture_output=True, text=True, env=env)
    assert made.returncode == 0, made.stderr
    config = json.loads((wide / "config.json").read_text())
    assert (config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"]) == (768, 12, 4)
    assert config["rms_norm_eps"] == pytest.approx(json.loads((src / "config.json").read_text())["rms_norm_eps"] * 0.75)
    assert (wide / "tokenizer.json").read_bytes() == (src / "tokenizer.json").read_bytes()
    checked = subprocess.run([*module, "check", str(src), str(wide)], capture_output=True, text=True, env=env)
    assert checked.returncode == 0, checked.stderr
    result = json.loads(checked.stdout)
    assert result["tokens"] > 50 and result["same_argmax"]
    # float32 rounding of the rescaled norm weights is all that differs: quantization's KL is 1e-3 and up
    assert result["max_kl"] < 1e-8, result


def test_a_wrong_norm_scale_is_caught_by_the_check(tmp_path):
    """The check can fail: the widened model with its norms left unscaled is a different function."""
    src = Path(os.environ["FRANK_MODELS"]) / "smollm2-135m"
    py, env = str(paths.engine_venv_python()), {**os.environ, "PYTHONPATH": str(REPO)}
    wide = tmp_path / "wide"
    unscaled = (
        "import sys, math; from pathlib import Path; import frank.engine.models.exl3_widen as w;"
        " w.math = type('m', (), {'sqrt': staticmethod(lambda x: 1.0)});"
        " w.widen(Path(sys.argv[1]), Path(sys.argv[2]))"
    )
    subprocess.run([py, "-c", unscaled, str(src), str(wide)], check=True, env=env, capture_output=True)
    checked = subprocess.run([py, "-m", "frank.engine.models.exl3_widen", "check", str(src), str(wide)],
                             capture_output=True, text=True, env=env, check=True)  # fmt: skip
    assert json.loads(checked.stdout)["max_kl"] > 1e-4
