"""The fidelity table file (frank.fidelity.table): built from saved floor runs by `frank fidelity table`, read
back by `frank fidelity report FILE`, and every wrong file refused naming the file and the field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from frank.fidelity import table as t
from frank.fidelity.runs import save_run

SETS = ("code", "agent", "prose")


def floor_run(run_id: str, profile: str, kls: tuple[float, ...], engine_floor: float = 1e-4) -> dict:
    """A saved floor run as frank.fidelity.runs.floor_run writes one (the keys a table reads)."""
    return {
        "id": run_id,
        "kind": "floor",
        "created_at": 1.0,
        "profile": profile,
        "knobs": {"context": 8192, "speculative": "none"},
        "model_sha256": "m",
        "top_k": 64,
        "sets": [
            {
                "name": name,
                "kl": kl,
                "positions": 4088,
                "misses": 3,
                "engine_floor": engine_floor,
                "floor": {"reference": 0.0, "engine": engine_floor, "engine_run": run_id, "value": engine_floor},
            }
            for name, kl in zip(SETS, kls)
        ],
    }


def test_a_table_from_floor_runs_reads_back_per_engine(frank_cli, fresh_frank_home, tmp_path):
    save_run(floor_run("20261204-1-floor-aaaa", "llamacpp-cpu", (0.05, 0.04, 0.06)))
    save_run(floor_run("20261204-2-floor-bbbb", "llamacpp-cpu", (0.4, 0.3, 0.35), engine_floor=0.0))
    out = tmp_path / "docs/fidelity/smollm2.json"
    written = frank_cli.json(
        "fidelity", "table", "--out", str(out), "--title", "SmolLM2-135M quantized", "--model", "smollm2-135m",
        "--row", "Q4_K_M=20261204-1-floor-aaaa", "--row", "IQ2_XXS=20261204-2-floor-bbbb",
        "--seed", "IQ2_XXS (seed)=code:0.270,agent:0.229,prose:0.199", "--machine", "this machine",
    )  # fmt: skip
    report = frank_cli.json("fidelity", "report", str(out))
    assert report == written
    assert report["sets"] == list(SETS)
    rows = {row["label"]: row for row in report["engines"]}
    assert rows["Q4_K_M"]["engine"] == "llama.cpp"  # the kind of the run's profile
    assert [s["kl"] for s in rows["IQ2_XXS"]["sets"]] == [0.4, 0.3, 0.35]
    assert [s["engine_floor"] for s in rows["Q4_K_M"]["sets"]] == [1e-4] * 3
    assert [s["reference_floor"] for s in rows["Q4_K_M"]["sets"]] == [0.0] * 3
    assert report["seed"] == [{"label": "IQ2_XXS (seed)", "kl": {"code": 0.27, "agent": 0.229, "prose": 0.199}}]
    human = frank_cli("fidelity", "report", str(out))
    assert human.returncode == 0 and "Q4_K_M" in human.stdout and "0.4000" in human.stdout
    # a row measured elsewhere joins the kept ones (and replaces a row of the same label)
    save_run(floor_run("20261204-3-floor-cccc", "llamacpp-cpu", (0.1, 0.1, 0.1)))
    grown = frank_cli.json(
        "fidelity", "table", "--out", str(out), "--title", "SmolLM2-135M quantized", "--model", "smollm2-135m",
        "--keep", str(out), "--row", "IQ2_XXS=20261204-3-floor-cccc", "--engine", "IQ2_XXS=llama.cpp (here)",
    )  # fmt: skip
    assert [(r["label"], r["engine"], r["run"]) for r in grown["engines"]] == [
        ("Q4_K_M", "llama.cpp", "20261204-1-floor-aaaa"),
        ("IQ2_XXS", "llama.cpp (here)", "20261204-3-floor-cccc"),
    ]
    assert grown["seed"] == report["seed"]


def test_a_single_run_makes_a_row_with_the_engine_floor_it_knows():
    run = floor_run("r", "p", (0.1, 0.1, 0.1)) | {"kind": "run"}
    for entry in run["sets"]:
        del entry["engine_floor"]  # a single run keeps only what an earlier floor run measured
    entry["floor"]["engine"] = None
    row = t.engine_row("x", "llama.cpp", run)
    assert [s.engine_floor for s in row.sets] == [1e-4, 1e-4, None]
    with pytest.raises(t.FrankError, match="a table row needs a measure"):
        t.engine_row("x", "llama.cpp", run | {"kind": "control"})


def good() -> dict:
    row = t.engine_row("Q4_K_M", "llama.cpp", floor_run("r1", "p", (0.1, 0.2, 0.3)))
    return t.build_table(Path("x.json"), "T", "m", "ref", [row], 64).model_dump(mode="json")


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.pop("title"), "title: missing required field"),
        (lambda d: d.update(format_version=2), "format_version: this frank reads version 1, got 2"),
        (lambda d: d.update(format="other"), "format: expected 'frank-fidelity-table'"),
        (lambda d: d["engines"][0]["sets"][0].update(kl=-0.1), "engines[0].sets[0].kl: must be at least 0"),
        (lambda d: d["engines"][0]["sets"][0].update(kl="0.1"), "engines[0].sets[0].kl:"),
        (lambda d: d["engines"][0]["sets"].pop(), "engines[0].sets: ['code', 'agent'] are not the table's sets"),
        (lambda d: d["engines"].append(d["engines"][0]), "engines: two rows with one label"),
        (lambda d: d["engines"][0].update(colour=1), "engines[0].colour: unknown field"),
        (lambda d: d["engines"][0]["sets"][0].update(kl=float("nan")), "engines[0].sets[0].kl"),
    ],
)
def test_a_wrong_table_is_refused_naming_the_file_and_field(tmp_path, change, message):
    data = good()
    change(data)
    path = tmp_path / "table.json"
    path.write_text(json.dumps(data))
    with pytest.raises(t.TableError) as err:
        t.load_table(path)
    assert re.match(rf"{re.escape(str(path))}(:\d+)?: ", str(err.value)) and message in str(err.value)


def test_a_file_that_is_not_json_names_its_line(tmp_path, frank_cli):
    path = tmp_path / "table.json"
    path.write_text('{\n  "format": "frank-fidelity-table",\n  oops\n}\n')
    result = frank_cli("fidelity", "report", str(path), "--json")
    assert result.returncode != 0
    assert f"{path}:3: not JSON" in result.stderr
