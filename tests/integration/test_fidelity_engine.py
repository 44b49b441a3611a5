"""Fidelity against the real embedded engine: the float32 engine sits at the reference's floor; a
bfloat16 start is clearly above it (checked on test_engine_lifecycle.py's first engine, which starts in
bfloat16: one vLLM start fewer than one of its own). (`frank fidelity floor`, which starts a configuration
twice, runs on llama.cpp in test_llamacpp_engine.py.)

Sets are small (two documents of 64 tokens) so the tests cost seconds beyond their engine starts."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from frank.fidelity.sets import Document, write_set

pytestmark = pytest.mark.engine

TEXTS = (
    "def merge(a, b):\n    out = []\n    while a and b:\n        out.append(a.pop(0) if a[0] <= b[0] else b.pop(0))\n"
    "    return out + a + b\n" * 4,
    "The engine keeps a prefix cache of blocks. A request that shares its opening with an earlier one "
    "reuses the blocks already computed, so its prefill is shorter. " * 4,
)


def small_set(path: Path) -> Path:
    return write_set(
        path, "small", "two short documents", [Document(f"d{i}", t) for i, t in enumerate(TEXTS)], max_tokens=64
    )


def test_float32_engine_sits_at_the_reference_floor(frank_cli, engine, tmp_path: Path) -> None:
    path = small_set(tmp_path / "small")
    run = frank_cli.json("fidelity", "run", "--sets", str(path))
    [entry] = run["sets"]
    assert entry["name"] == "small" and entry["positions"] == 2 * 63  # both documents fill 64 tokens
    assert len(entry["reference_sha256"]) == 64 and run["knobs"]["dtype"] == "float32"
    floor = entry["floor"]["reference"]
    assert 0 <= floor < 1e-12  # the reference against its twin, rounded to float32
    assert 0 <= entry["kl"] < 1e-12, entry  # float32 engine: float32 rounding, nothing more
    assert entry["misses"] == 0
    assert stat.S_IMODE(os.stat(run["path"]).st_mode) == 0o600

    # the reference is cached: a second run compares against the very same arrays
    again = frank_cli.json("fidelity", "run", "--sets", str(path))
    assert again["sets"][0]["reference_sha256"] == entry["reference_sha256"]
    assert again["sets"][0]["kl"] == pytest.approx(entry["kl"], abs=1e-15)
    listed = frank_cli.json("fidelity", "list")
    assert [r["id"] for r in listed["runs"]][-2:] == [run["id"], again["id"]]
    # a prefix of its id names a run (two runs made in the same second share all but the id's random tail:
    # the prefix is the shortest no other run's id begins; the shared one's refusal: tests/unit)
    others = [r["id"] for r in listed["runs"] if r["id"] != run["id"]]
    unique = next(
        run["id"][:n] for n in range(16, len(run["id"]) + 1) if not any(o.startswith(run["id"][:n]) for o in others)
    )
    report = frank_cli("fidelity", "report", unique)
    assert report.returncode == 0 and "small" in report.stdout and "REF FLOOR" in report.stdout

    missing = frank_cli("fidelity", "run", "--sets", "no-such-set")
    assert missing.returncode != 0 and "no fidelity set 'no-such-set'" in missing.stderr


def check_bfloat16_is_far_above_the_float32_floor(
    frank_cli, bf16_home: Path, session_home: Path, tmp_path: Path
) -> None:
    """A bfloat16 start of vLLM (running in `bf16_home`, a home of its own) against the shared float32 engine
    (the session's home) on the same set. Called by test_engine_lifecycle.py on its bfloat16 engine. (The
    floor's two starts and its third with a knob changed: test_llamacpp_engine.py's, on llama.cpp's engine,
    which starts in a second where vLLM takes a minute.)"""
    path = small_set(tmp_path / "small")
    # the two runs side by side: each computes the set's reference in its own home, on one core
    f32_run = frank_cli.popen("fidelity", "run", "--sets", str(path), "--json", home=session_home)
    bf16 = frank_cli.json("fidelity", "run", "--sets", str(path), home=bf16_home)
    out, _ = f32_run.communicate(timeout=600)
    assert f32_run.returncode == 0, "frank fidelity run on the shared engine failed (its stderr is above)"
    [f32] = json.loads(out)["sets"]
    [entry] = bf16["sets"]
    assert bf16["knobs"]["dtype"] == "bfloat16" and entry["reference_sha256"] == f32["reference_sha256"]
    assert entry["floor"]["engine"] is None, "no floor of this configuration was measured"
    assert entry["kl"] > 100 * max(f32["kl"], f32["floor"]["value"], 1e-15), (entry, f32)
