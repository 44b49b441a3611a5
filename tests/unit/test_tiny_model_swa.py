"""tiny-frank-swa builds deterministically and differs from tiny-frank only by its sliding-window attention.

Same tokenizer (so the front end the region cache acts on is unchanged), same chat template, same weights;
its config adds `sliding_window` and marks every layer `sliding_attention`. Two real builds in the engine
venv, side by side (each a single-threaded process), about 10 s.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from frank import paths
from frank.engine.models import tiny_model
from frank.errors import FrankError

# sha256 of tiny-frank-swa's manifest.json. Update it (and bump its build version in tiny_model.MODELS) only
# when the builder changes on purpose.
EXPECTED_SWA_MANIFEST_SHA256 = "4da216193d6596b07d32adeccf321de8365161641f2587eedb779d5013767946"

needs_engine_venv = pytest.mark.skipif(not paths.engine_venv_python().exists(), reason="no engine venv")


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The module's build and a forced second one in a folder of its own, side by side."""
    root = tmp_path_factory.mktemp("models")
    swa = root / tiny_model.SWA_MODEL_NAME
    again = tmp_path_factory.mktemp("again") / "again"
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(tiny_model.build_via_engine_venv, swa, name=tiny_model.SWA_MODEL_NAME)
        second = pool.submit(tiny_model.build_via_engine_venv, again, force=True, name=tiny_model.SWA_MODEL_NAME)
        assert first.result().built is True
        second.result()
    return swa, root, again


@pytest.fixture(scope="module")
def built_pair(builds: tuple[Path, Path, Path]) -> tuple[Path, Path]:
    return builds[0], builds[1]


@needs_engine_venv
def test_swa_build_is_pinned_and_byte_identical_when_rebuilt(builds: tuple[Path, Path, Path]) -> None:
    swa, _, again = builds
    assert tiny_model.check_build(swa, tiny_model.SWA_MODEL_NAME) is None
    assert tiny_model.manifest_digest(swa) == EXPECTED_SWA_MANIFEST_SHA256
    for name in tiny_model.read_manifest(swa)["files"]:
        assert (again / name).read_bytes() == (swa / name).read_bytes(), name


@needs_engine_venv
def test_swa_shares_tokenizer_template_and_weights_with_tiny_frank(built_pair: tuple[Path, Path]) -> None:
    swa, _ = built_pair
    manifest = tiny_model.read_manifest(swa)
    # tiny-frank's own manifest is pinned in test_tiny_model.py; compare file by file against a fresh build
    # through the library's own function (no second engine-venv build: the shared test model is current).
    plain = paths.models_dir() / tiny_model.MODEL_NAME
    if tiny_model.check_build(plain) is not None:
        pytest.skip(f"{plain}: no current tiny-frank build to compare with")
    plain_files = tiny_model.read_manifest(plain)["files"]
    for name in (
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "model.safetensors",
        "generation_config.json",
    ):
        assert manifest["files"][name]["sha256"] == plain_files[name]["sha256"], name
    config = json.loads((swa / "config.json").read_text())
    base = json.loads((plain / "config.json").read_text())
    assert {k: v for k, v in config.items() if k not in ("sliding_window", "layer_types")} == base
    assert config["sliding_window"] == tiny_model.SLIDING_WINDOW
    assert config["layer_types"] == ["sliding_attention"] * base["num_hidden_layers"]


@needs_engine_venv
def test_a_tiny_frank_build_is_not_a_current_swa_build(built_pair: tuple[Path, Path]) -> None:
    swa, _ = built_pair
    assert "builder_version" in tiny_model.check_build(swa, tiny_model.MODEL_NAME)


def test_unknown_model_names_are_refused_with_the_known_ones() -> None:
    with pytest.raises(
        FrankError, match="no built-in model 'tiny-frank-xl': expected one of tiny-frank, tiny-frank-swa"
    ):
        tiny_model.spec_for("tiny-frank-xl")
