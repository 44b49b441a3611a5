"""Records whose values are sealed (frank.experiments.seal) and typed where read (frank.experiments.values): a
screen's exported record and a run's results CSV. An edited value is refused naming its field or line (its
seal kept or not), a stated pick its values do not give is refused, a value that cannot be its measure's is
refused, and where the run is registered here its journal is compared too. The `frank` CLI exits 1 with no
traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from frank.experiments import registry, seal
from frank.experiments.design import EPISODE_MEASURES, MEASURES, load_design
from frank.experiments.errors import ResultsError
from frank.experiments.results_csv import read_results_csv, results_csv_for_run
from frank.experiments.screen_report import ScreenRecordError, read_record, record_for_run, write_json
from frank.experiments.values import UNITS, value_problem
from tests.unit.test_experiment_screen import _screen_run

REPO = Path(__file__).resolve().parents[2]
DESIGNS = REPO / "frank" / "experiments" / "designs"
SHIPPED_RECORD = REPO / "frank" / "experiments" / "screens" / "cpu-pool-h200.json"


@pytest.fixture(autouse=True)
def frank_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FRANK_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A screen run's record, exported and then read where the run is not registered (seals only)."""
    path = tmp_path / "rec.json"
    write_json(path, record_for_run(_screen_run(tmp_path)))
    monkeypatch.setenv("FRANK_HOME", str(tmp_path / "elsewhere"))
    return path


def edit(path: Path, change) -> dict:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return data


def line_of(path: Path, pattern: str, nth: int = 0) -> int:
    return [n for n, line in enumerate(path.read_text().splitlines(), 1) if re.search(pattern, line)][nth]


def refusal(path: Path) -> str:
    with pytest.raises(ScreenRecordError) as err:
        read_record(path)
    return str(err.value)


def test_an_exported_record_reads_back_as_it_was(exported: Path) -> None:
    rec = read_record(exported)
    assert rec.result.pick == "cpu_poll.100" and len(rec.cells) == 12
    assert json.loads(exported.read_text())["values_seal"] == rec.cells[-1]["seal"]


def test_an_edited_value_with_its_seal_kept_is_refused_at_its_cell_and_line(exported: Path) -> None:
    data = json.loads(exported.read_text())
    i = next(k for k, c in enumerate(data["cells"]) if c["setting"] == "cpu_poll.50")
    edit(exported, lambda d: d["cells"][i].update(value=0.5))  # now the fastest: the pick would move
    line = line_of(exported, r'"value": 0\.5')
    assert refusal(exported).startswith(f"{exported}:{line}: cells[{i}].value: 'cpu_poll.50' in repeat ")


def test_a_stated_pick_its_values_do_not_give_is_refused(exported: Path) -> None:
    edit(exported, lambda d: d["result"].update(pick="one-thread"))
    line = line_of(exported, r'"pick": "one-thread"')
    assert refusal(exported).startswith(
        f"{exported}:{line}: result.pick: the record says 'one-thread'; its values pick 'cpu_poll.100'"
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["cells"].pop(3), r"cells\[3\]\.value: .* or a cell before it was removed or moved"),
        (lambda d: d["cells"].insert(0, d["cells"].pop(5)), r"cells\[0\]\.value: .*its seal covers"),
        (lambda d: d["cells"].pop(), r"values_seal: is not the last cell's seal"),
        (lambda d: d["cells"][2].update(seal="0" * 16), r"cells\[2\]\.value: .*its seal covers"),
        (lambda d: d["cells"][2].update(attempts=5), r"cells\[2\]\.value: .*its seal covers"),
    ],
)
def test_cells_cut_moved_or_resealed_by_hand_are_refused(exported: Path, change, field: str) -> None:
    edit(exported, change)
    assert re.match(rf"{re.escape(str(exported))}:\d+: {field}", refusal(exported)), refusal(exported)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (-0.01, "-0.01 is negative; time_per_verify_step is seconds, never negative"),
        (True, "expected a number, got True"),
        ("fast", "expected a number, got 'fast'"),
    ],
)
def test_a_value_that_cannot_be_a_time_is_refused_at_its_cell(exported: Path, value, reason: str) -> None:
    edit(exported, lambda d: d["cells"][4].update(value=value))
    assert re.match(rf"{re.escape(str(exported))}:\d+: cells\[4\]\.value: {re.escape(reason)}$", refusal(exported))


@pytest.mark.parametrize("constant", ["NaN", "-Infinity"])
def test_nan_and_infinity_are_not_json_and_are_refused_at_their_line(exported: Path, constant: str) -> None:
    text = exported.read_text()
    first = re.search(r'"value": [0-9.e-]+', text)
    assert first is not None
    exported.write_text(text[: first.start()] + f'"value": {constant}' + text[first.end() :])
    line = text.count("\n", 0, first.start()) + 1
    assert re.fullmatch(
        rf"{re.escape(str(exported))}:{line}: cells\[\d+\]\.value: {constant} is not a JSON number", refusal(exported)
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", ":1: expected a JSON object (a screen record), got a JSON list"),
        ('{"format": "frank-screen-record-2", "screen_toml": 5}', ":1: screen_toml: expected a JSON str, got 5"),
    ],
)
def test_a_record_of_the_wrong_shape_is_refused_naming_where(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "rec.json"
    path.write_text(text)
    assert refusal(path) == f"{path}{message}"


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (lambda d: d.update(cells=5), "cells", "expected a JSON list, got 5"),
        (lambda d: d.update(screen_toml=5), "screen_toml", "expected a JSON str, got 5"),
        (lambda d: d["cells"].__setitem__(1, "x"), r"cells\[1\]", "expected a JSON object, got 'x'"),
        (lambda d: d["cells"][1].pop("seal"), r"cells\[1\]\.seal", "missing required field"),
        (lambda d: d["cells"][1].update(repeat=-1), r"cells\[1\]\.repeat", "expected a whole number of at least 1"),
        (lambda d: d.update(format="frank-screen-record-1"), "format", "'frank-screen-record-1' was written before"),
    ],
)
def test_a_record_with_a_field_of_the_wrong_type_is_refused_at_it(exported: Path, change, field, message) -> None:
    edit(exported, change)
    assert re.match(rf"{re.escape(str(exported))}:\d+: {field}: {re.escape(message)}", refusal(exported))


def test_where_the_run_is_registered_its_journal_is_the_source(tmp_path: Path) -> None:
    """A value edited and resealed (as a forger would, with frank's own seal function) still differs from the
    journal of the run registered here."""
    path = tmp_path / "rec.json"
    write_json(path, record_for_run(_screen_run(tmp_path)))

    def forge(d: dict) -> None:
        d["cells"][0]["value"] = 0.001
        rows = [json.dumps({k: c[k] for k in sorted(c) if k != "seal"}, separators=(",", ":")) for c in d["cells"]]
        for cell, s in zip(d["cells"], seal.chain(d["screen_sha256"], rows), strict=True):
            cell["seal"] = s
        d["values_seal"] = d["cells"][-1]["seal"]

    edit(path, forge)
    assert re.search(
        r"cells\[0\]\.value: '[\w.-]+' in repeat 1: 0\.001 in the record, .* in run .*'s journal", refusal(path)
    )


def test_the_cli_refuses_an_edited_record_with_exit_1(exported: Path, frank_cli, tmp_path: Path) -> None:
    edit(exported, lambda d: d["cells"][0].update(value=1e-9))
    result = frank_cli("experiment", "screen", "--report", str(exported), home=tmp_path / "elsewhere", timeout=120)
    assert result.returncode == 1, result.stderr
    assert re.search(rf"{re.escape(str(exported))}:\d+: cells\[0\]\.value: ", result.stderr), result.stderr
    assert "Traceback" not in result.stderr


def test_the_shipped_record_is_sealed_and_holds() -> None:
    rec = read_record(SHIPPED_RECORD)
    assert rec.result.pick == "threads-12" and all(c["seal"] for c in rec.cells)


# -- a run's results CSV ------------------------------------------------------------------------------------


def sealed_csvs() -> list[Path]:
    return sorted(p for p in DESIGNS.glob("*.csv") if "# design-sha256:" in p.read_text())


@pytest.mark.parametrize("path", sealed_csvs(), ids=lambda p: p.name)
def test_every_shipped_exported_csv_is_sealed_and_holds(path: Path) -> None:
    design = load_design(_design_of(path))
    assert read_results_csv(path, design)


def _design_of(csv: Path) -> Path:
    name = re.search(r"^# design: (\S+)", csv.read_text(), re.M)
    assert name is not None
    return next(p for p in DESIGNS.glob("*.toml") if load_design(p).name == name.group(1))


def _rows(text: str) -> list[int]:
    """The line numbers of a CSV's data rows (after the header)."""
    lines = [n for n, line in enumerate(text.splitlines(), 1) if line.strip() and not line.startswith("#")]
    return lines[1:]


@pytest.mark.parametrize(
    ("edit_row", "message"),
    [
        (lambda cols: cols.__setitem__(3, "1.0"), "value: this row's values are not the ones its seal covers"),
        (lambda cols: cols.__setitem__(2, "cache-on"), "value: this row's values are not the ones its seal covers"),
    ],
)
def test_an_edited_row_of_an_exported_csv_is_refused_at_its_line(tmp_path: Path, edit_row, message: str) -> None:
    src = DESIGNS / "region-cache-gpu-h200.csv"
    design = load_design(DESIGNS / "region-cache-gpu.toml")
    text = src.read_text()
    lines = text.splitlines()
    at = _rows(text)[2]  # the third row
    cols = lines[at - 1].split(",")
    edit_row(cols)
    lines[at - 1] = ",".join(cols)
    path = tmp_path / "r.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ResultsError) as err:
        read_results_csv(path, design)
    assert str(err.value).startswith(f"{path}:{at}: {message}"), str(err.value)


def test_an_exported_csv_without_its_seals_or_with_rows_cut_is_refused(tmp_path: Path) -> None:
    src = DESIGNS / "region-cache-gpu-h200.csv"
    design = load_design(DESIGNS / "region-cache-gpu.toml")
    text = src.read_text()
    path = tmp_path / "r.csv"
    path.write_text(text.rstrip("\n").rsplit("\n", 1)[0] + "\n")  # the last row cut
    with pytest.raises(ResultsError, match=r":\d+: values-seal: is not the last row's seal"):
        read_results_csv(path, design)
    unsealed = "\n".join(
        line.rsplit(",", 1)[0] if not line.startswith("#") else line for line in text.splitlines()
    ).replace("# values-seal:", "# note:")
    path.write_text(unsealed + "\n")
    with pytest.raises(ResultsError, match=r":\d+: seal: an exported run's rows are sealed and this one is not"):
        read_results_csv(path, design)


@pytest.mark.parametrize(
    ("value", "reason"),
    [("-1.5", "-1.5 is negative; front_end_per_draw is seconds"), ("nan", "nan is not a finite number")],
)
def test_a_value_that_cannot_be_its_measures_is_refused_at_its_line(tmp_path: Path, value: str, reason: str) -> None:
    """Measures taken elsewhere (no provenance, no seal) are typed too: `analyze` once decided on a negative time."""
    design = load_design(DESIGNS / "seed-region-cache.toml")
    text = (DESIGNS / "seed-region-cache.csv").read_text()
    at = _rows(text)[1]
    lines = text.splitlines()
    cols = lines[at - 1].split(",")
    cols[3] = value
    lines[at - 1] = ",".join(cols)
    path = tmp_path / "r.csv"
    path.write_text("\n".join(lines) + "\n")
    assert design.measure == "front_end_per_draw"
    with pytest.raises(ResultsError) as err:
        read_results_csv(path, design)
    assert str(err.value).startswith(f"{path}:{at}: value: {reason}"), str(err.value)


def test_a_run_exported_here_is_compared_with_its_journal(tmp_path: Path) -> None:
    from frank.experiments.runner import run_experiment
    from tests.unit.test_experiment_runner import FakeCellExecutor

    design_path = tmp_path / "d.toml"
    design_path.write_text((DESIGNS / "spec-tokens-2-vs-4.toml").read_text())
    run = registry.register(design_path, seed=5)
    assert run_experiment(run, FakeCellExecutor()).reason == "finished"
    path = tmp_path / "r.csv"
    path.write_text(results_csv_for_run(registry.load_run(run.run_id)))
    assert read_results_csv(path, run.design)
    text = path.read_text()
    rows = [n for n, line in enumerate(text.splitlines(), 1) if re.match(r"^\d+,", line)]
    lines = text.splitlines()
    cols = lines[rows[0] - 1].split(",")
    cols[3] = repr(float(cols[3]) * 2)
    lines[rows[0] - 1] = ",".join(cols)
    forged = _reseal(lines, run.design.sha256)  # as a forger would: every seal again, and the last
    path.write_text("\n".join(forged) + "\n")
    with pytest.raises(ResultsError, match=rf"^{re.escape(str(path))}:{rows[0]}: value: .* in run .*'s journal"):
        read_results_csv(path, run.design)


def _reseal(lines: list[str], start: str) -> list[str]:
    from frank.experiments.results_csv import _row_text

    header = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    names = lines[header].split(",")
    out, before = list(lines), start
    for i in range(header + 1, len(lines)):
        cols = dict(zip(names, lines[i].split(","), strict=True))
        row = _row_text(
            int(cols["start_order"] or 0),
            int(cols["block"]) if cols.get("block") else None,
            cols["arm"],
            float(cols["value"]),
            cols.get("measure", ""),
            int(cols["failed_requests"]) if cols.get("failed_requests") else None,
            cols.get("prompt_ids_sha256", ""),
        )
        before = seal.link(before, row)
        out[i] = ",".join([*lines[i].split(",")[:-1], before])
    return [f"# values-seal: {before}" if line.startswith("# values-seal:") else line for line in out]


def test_every_measure_a_design_can_name_has_a_unit() -> None:
    assert set(MEASURES) | set(EPISODE_MEASURES) <= set(UNITS)
    assert value_problem("episodes_passed", 2.5) == "2.5 is not a whole number; episodes_passed counts episodes"
    assert value_problem("fidelity:code", -1e-9) is not None and value_problem("fidelity:code", 0.0) is None
    assert value_problem("my_own_measure", -3) is None  # an external design's measure: only finite
