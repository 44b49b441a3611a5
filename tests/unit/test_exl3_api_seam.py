"""frank's generator layer over exllamav3 against exllamav3 1.6.5's own wheel (scripts/check_exl3_api.py): the layer
runs only on the GPU machine, so its calls, flags and result keys are proven here, and each kind of drift is
caught."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.check_exl3_api import SOURCE, check, main

REPO = Path(__file__).resolve().parents[2]
WHEEL = REPO / ".device/exl3/exllamav3-1.6.5-py3-none-any.whl"


@pytest.fixture(scope="module")
def wheel() -> Path:
    assert WHEEL.is_file(), f"{WHEEL} is missing: `make exl3-wheel` downloads it"
    return WHEEL


def test_every_call_flag_and_result_key_of_the_layer_is_in_the_wheel(wheel, capsys):
    found = check(wheel)
    assert [f.what for f in found if not f.ok] == []
    whats = " | ".join(f.what for f in found)
    # what the check must have looked at, so an empty or partial walk cannot pass
    for expected in (
        "from exllamav3 import Job",
        "Job() (line",
        "num_draft_tokens= is a parameter of Generator.__init__",
        "model_init flag --mtp",
        'result key "accepted_draft_tokens"',
        "EXPERT_STATS_DIR: block_sparse_mlp_cpu's module global",
    ):
        assert expected in whats
    assert main([str(wheel)]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"of {len(found)} found in {wheel.name}")


@pytest.mark.parametrize(
    ("old", "new", "missing"),
    [
        ("max_new_tokens=sampling.max_tokens", "max_tokens=sampling.max_tokens", "max_tokens= is a parameter of Job"),
        ('"--cache_size"', '"--cache-size"', "model_init flag --cache-size"),
        ('done.get("accepted_draft_tokens", 0)', 'done.get("accepted_tokens", 0)', 'result key "accepted_tokens"'),
        ("self.generator.cancel(job)", "self.generator.abort(job)", "self.generator.abort() (line"),
        ("from exllamav3 import Job", "from exllamav3 import Task", "from exllamav3 import Task"),
        ("self.model.forward(input_ids=ids,", "self.model.forward(ids, 1, 2,", "3 positional arguments"),
    ],
)
def test_a_call_the_wheel_does_not_have_is_reported(wheel, tmp_path, old, new, missing):
    text = SOURCE.read_text()
    assert old in text
    drifted = tmp_path / "exl3_generator.py"
    drifted.write_text(text.replace(old, new))
    found = check(wheel, drifted)
    assert [f.what for f in found if not f.ok and missing in f.what], [f.what for f in found if not f.ok]
    assert main([str(wheel), "--source", str(drifted)]) == 1


def test_a_missing_or_broken_wheel_is_named_and_exits_2(tmp_path, capsys):
    broken = tmp_path / "exllamav3-1.6.5-py3-none-any.whl"
    broken.write_text("not a zip")
    for path, said in ((tmp_path / "absent.whl", "no such file"), (broken, "not a wheel (not a zip archive)")):
        with pytest.raises(SystemExit) as exit_:
            main([str(path)])
        assert exit_.value.code == 2
        assert f"{path}: {said}" in capsys.readouterr().err
