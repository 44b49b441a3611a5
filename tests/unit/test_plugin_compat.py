"""frank/plugins/compat.py: a part checks what it patches in vLLM before it patches, and stays off on a mismatch.

Engine-free: the fingerprint ignores docstrings, comments and layout but not code; read from a file it
equals the one read from the loaded object; the verdict needs every target to match one and the same
verified version. In the engine venv (tests/unit/plugin_compat_engine_check.py): vLLM 0.32's internals
changed in-process before the parts register, and each changed part stays off with the reason on its
control endpoint; `frank bench part --list --json` checks the engine venv's real vLLM.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from frank import paths
from frank.experiments.bench import list_parts
from frank.plugins import compat

REPO = Path(__file__).resolve().parents[2]
ENGINE_PYTHON = paths.engine_venv_python()
needs_engine_venv = pytest.mark.skipif(not ENGINE_PYTHON.exists(), reason=f"no engine venv at {ENGINE_PYTHON}")

SOURCE = '''
class Renderer:
    def tokenize(self, prompt, params, *, extra=None):
        """Docstring."""
        # a comment
        return prompt.upper() + str(params)
'''


def _fingerprint(source: str) -> tuple[str, str]:
    return compat.fingerprint_node(ast.parse(textwrap.dedent(source)).body[0])


def test_the_fingerprint_is_the_code_not_its_layout_comments_or_docstrings():
    same = SOURCE.replace('"""Docstring."""', '"""Another docstring."""').replace("# a comment", "")
    same = same.replace("prompt.upper() + str(params)", "(prompt.upper()\n            + str(params))")
    assert _fingerprint(same) == _fingerprint(SOURCE)
    changed = SOURCE.replace("upper", "lower")
    assert _fingerprint(changed)[1] != _fingerprint(SOURCE)[1]
    method = ast.parse(SOURCE).body[0].body[0]
    assert compat.signature_of(method) == "(self, prompt, params, *, extra=)"


def test_read_from_a_file_equals_read_from_the_loaded_object(tmp_path, monkeypatch):
    (tmp_path / "fake_renderer.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = importlib.util.spec_from_file_location("fake_renderer", tmp_path / "fake_renderer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "fake_renderer", module)
    from_file = compat.fingerprint_file(tmp_path / "fake_renderer.py", "Renderer.tokenize")
    assert compat.fingerprint_object(module.Renderer.tokenize) == from_file
    target = compat.Target("fake_renderer:Renderer.tokenize", {"1.0": from_file})
    assert compat.resolve(target) is module.Renderer.tokenize

    def frank_wrapper(*a):  # frank's own wrapper (a part installed before) is looked through, no other
        return module.Renderer.tokenize(*a)

    frank_wrapper._frank_part = True
    frank_wrapper.__wrapped__ = module.Renderer.tokenize
    assert compat.unwrapped(frank_wrapper) is module.Renderer.tokenize

    def foreign(*a):
        return None

    foreign.__wrapped__ = module.Renderer.tokenize
    assert compat.unwrapped(foreign) is foreign


def _patches(*targets: tuple[str, dict]) -> compat.Patches:
    patches = compat.Patches("test-part", tuple(compat.Target(w, v) for w, v in targets))
    compat._declared.pop("test-part")  # not a plugin of this process: keep it out of verdicts()
    return patches


A1, A2, B1, B2 = ("(self)", "a1"), ("(self)", "a2"), ("(x)", "b1"), ("(x)", "b2")


def test_compatible_only_when_every_target_matches_one_verified_version():
    p = _patches(("m:A", {"1.0": A1, "2.0": A2}), ("m:B", {"1.0": B1, "2.0": B2}))
    assert p.verified_vllm == ["1.0", "2.0"]
    assert compat.judge(p, {"m:A": A2, "m:B": B2}, "2.0").matched_vllm == "2.0"
    same_code = compat.judge(p, {"m:A": A1, "m:B": B1}, "1.5")  # another version number, the verified code
    assert same_code.compatible and same_code.matched_vllm == "1.0"
    hybrid = compat.judge(p, {"m:A": A1, "m:B": B2}, "9")  # each target known, never one version whole
    assert not hybrid.compatible and "never one whole" in hybrid.problems[0]
    changed = compat.judge(p, {"m:A": ("(self)", "zz"), "m:B": ("(x, y)", "b1")}, "3.0")
    assert not changed.compatible
    assert changed.problems == [
        "m:A: code fingerprint zz is none of the verified versions",
        "m:B: signature (x, y) (verified: (x))",
    ]
    missing = compat.judge(p, {"m:A": "not found (AttributeError: A)", "m:B": B1}, "3.0")
    assert not missing.compatible and missing.problems == ["m:A: not found (AttributeError: A)"]
    assert "vLLM 3.0 differs from the code it was verified on (1.0, 2.0)" in missing.reason


def test_a_target_absent_in_one_version_must_be_absent_there():
    p = _patches(("m:A", {"1.0": A1, "2.0": A2}), ("m:Check", {"1.0": compat.ABSENT, "2.0": B2}))
    assert compat.judge(p, {"m:A": A1, "m:Check": "not found (AttributeError)"}, "1.0").matched_vllm == "1.0"
    assert not compat.judge(p, {"m:A": A1, "m:Check": B2}, "1.0").compatible  # 1.0's code with a check added
    assert not compat.judge(p, {"m:A": A2, "m:Check": "not found (AttributeError)"}, "2.0").compatible


@needs_engine_venv
def test_a_part_that_finds_a_changed_internal_stays_off_and_its_control_endpoint_says_why():
    proc = subprocess.run(
        [str(ENGINE_PYTHON), str(REPO / "tests" / "unit" / "plugin_compat_engine_check.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    # nothing patched over the changed code; the untouched part installed as usual
    assert r["tokenize_prompt_untouched"] and r["protected_step_untouched"] and r["hash_untouched"]
    assert r["held_prompt_installed"]
    status, region = r["region_get"]
    assert status == 200 and region["enabled"] is False
    assert region["compat"]["compatible"] is False and region["compat"]["refusals"] == 1
    assert "BaseRenderer._tokenize_prompt: code fingerprint" in region["refused"]
    assert r["region_on"][0] == 409 and "BaseRenderer._tokenize_prompt" in r["region_on"][1]["error"]
    status, detok = r["detok_get"]
    assert status == 200 and detok["enabled"] is False and detok["counts"] == {"refused_incompatible": 1}
    assert (
        "_protected_step: signature (self, next_token_id, skip=) (verified: (self, next_token_id))" in detok["refused"]
    )
    assert r["detok_on"][0] == 409
    listed = {v["part"]: v["compatible"] for v in r["parts_get"][1]["compat"]}
    assert listed["detok-tail"] is False and listed["region-cache"] is False and listed["held-prompt"] is True
    assert r["block_hash_memo"]["enabled"] is False and "hash_block_tokens" in r["block_hash_memo"]["refused"]
    metrics = set(r["metrics"])
    assert 'frank:plugin_compatible{part="detok-tail",vllm="0.32.0"} 0.0' in metrics
    assert 'frank:plugin_compatible{part="held-prompt",vllm="0.32.0"} 1.0' in metrics
    assert "frank:plugins_refused 3.0" in metrics and "frank:region_cache_enabled 0.0" in metrics


@needs_engine_venv
def test_bench_part_list_gives_each_part_its_verified_versions_and_the_engine_venvs_verdict():
    rows = list_parts()
    names = [row["name"] for row in rows]
    assert names == ["detok-tail", "block-hash-memo", "held-prompt", "region-cache", "idle-release", "shm-idle"]
    for row in rows:
        assert row["vllm"] == "0.32.0" and "0.32.0" in row["verified_vllm"], row
        assert row["compatible"] is True and row["problems"] == [], row
