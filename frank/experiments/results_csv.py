"""Results as CSV: `frank experiment analyze DESIGN.toml RESULTS.csv` reads them (measures taken elsewhere,
or a registered run's values exported by `frank experiment report RUN --csv`, which this module writes with
the run's provenance in `#` comment lines).

Every value is typed where it is read (frank.experiments.values: finite, of its measure's sign). An exported
run's rows are sealed (frank.experiments.seal: a `seal` column, the last seal in `# values-seal:`): a value
edited after export is refused at its line, and where the run is registered here, each value is compared
with its journal. Measures taken elsewhere carry no provenance and no seal: nothing vouches for them but
their source."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from frank import readfile
from frank.experiments import seal
from frank.experiments.design import Design
from frank.experiments.errors import ResultsError
from frank.experiments.fidelity import FidelityResult
from frank.experiments.observations import ALL_PROMPTS, Observation
from frank.experiments.report import report_for_run, run_observations
from frank.experiments.values import value_problem

if TYPE_CHECKING:
    from frank.experiments.registry import Run

_COLUMNS = {
    "start_order": "start",
    "start order": "start",
    "start": "start",
    "order": "start",
    "block": "block",
    "arm": "arm",
    "value": "value",
    "measure": "measure",
    "failed_requests": "failed_requests",
    "prompt_ids_sha256": "prompt_ids_sha256",
    "seal": "seal",
}


def prompt_ids_digest(hashes: dict[str, str | None] | None) -> str:
    """One sha256 over a start's per-request prompt-ID hashes ("draw/id hash" lines, sorted), so a results
    CSV carries what the prompt-IDs guard compares; empty when a request has none (the guard then says
    unchecked, never pass)."""
    if not hashes or any(not h for h in hashes.values()):
        return ""
    lines = "".join(f"{k} {hashes[k]}\n" for k in sorted(hashes))
    return hashlib.sha256(lines.encode()).hexdigest()


PROVENANCE_KEYS = ("run", "design", "design-sha256", "values-seal")  # `# key: value` lines of an exported run


def _row_text(
    start: int, block: int | None, arm: str, value: float, measure: str, failed: int | None, digest: str
) -> str:
    """A row's values as its seal covers them (parsed, so spacing and number spelling do not matter)."""
    return json.dumps([start, block, arm, repr(float(value)), measure, failed, digest], separators=(",", ":"))


def results_provenance(text: str) -> dict[str, tuple[int, str]]:
    """The `# run: ...`, `# design: ...`, `# design-sha256: ...` comments of a results CSV: key -> (line,
    value). Written by `frank experiment report RUN --csv`; absent from measures taken elsewhere."""
    out: dict[str, tuple[int, str]] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped.startswith("#"):
            continue
        key, sep, value = stripped[1:].strip().partition(":")
        if sep and key.strip() in PROVENANCE_KEYS and key.strip() not in out:
            out[key.strip()] = (n, value.strip())
    return out


def read_results_csv(path: Path | str, design: Design) -> list[Observation]:
    """Rows: start order, block, arm, value (and `measure` for a criteria design). `#` lines are comments;
    a `# design-sha256: HEX` comment (an exported registered run) must name this design."""
    path = Path(path)
    text = readfile.read_text(path, readfile.CSV, ResultsError)
    stated = results_provenance(text).get("design-sha256")
    if stated and stated[1] != design.sha256:
        raise ResultsError(
            f"{path}:{stated[0]}: design-sha256 {stated[1][:12]}… is not the design's ({design.name}, "
            f"{design.sha256[:12]}…): these results are of another design"
        )
    lines = [
        (n, line)
        for n, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        raise ResultsError(f"{path}: no header and no rows")
    header_no, header = lines[0]
    names = next(csv.reader(io.StringIO(header)))
    columns = {}
    for i, raw in enumerate(names):
        key = _COLUMNS.get(raw.strip().lower())
        if key is None:
            raise ResultsError(
                f"{path}:{header_no}: unknown column {raw.strip()!r} "
                f"(columns: start_order, block, arm, value[, measure, failed_requests, prompt_ids_sha256])"
            )
        columns[key] = i
    needed = ["start", "arm", "value"] + (["measure"] if design.kind == "external" else [])
    if design.kind == "blocks":
        needed.append("block")
    for key in needed:
        if key not in columns:
            raise ResultsError(f"{path}:{header_no}: missing column {key if key != 'start' else 'start_order'!r}")
    arms = {a.name for a in design.arms}
    out: list[Observation] = []
    rows: list[tuple[int, str, str]] = []  # (line, stated seal, the values it covers)
    for number, line in lines[1:]:
        row = next(csv.reader(io.StringIO(line)))
        where = f"{path}:{number}"
        if len(row) != len(names):
            raise ResultsError(f"{where}: expected {len(names)} fields, got {len(row)}")

        def get(key: str, row: list[str] = row) -> str:
            return row[columns[key]].strip() if key in columns else ""

        arm = get("arm")
        if arm not in arms:
            raise ResultsError(f"{where}: arm: {arm!r} is not an arm of the design ({', '.join(sorted(arms))})")
        try:
            start = int(get("start")) if get("start") else 0
        except ValueError:
            raise ResultsError(f"{where}: start_order: {get('start')!r} is not a whole number") from None
        try:
            block = int(get("block")) if get("block") else None
        except ValueError:
            raise ResultsError(f"{where}: block: {get('block')!r} is not a whole number") from None
        try:
            value = float(get("value"))
        except ValueError:
            raise ResultsError(f"{where}: value: {get('value')!r} is not a number") from None
        measure = get("measure")
        problem = value_problem(measure or design.measure, value)
        if problem:
            raise ResultsError(f"{where}: value: {problem}")
        # a start's KL or a floor (`fidelity:SET`, `fidelity_floor:SET`) is named by its start, not a block
        if design.kind == "blocks" and not measure.startswith(("fidelity:", "fidelity_floor:")):
            if block is None or not 1 <= block <= int(design.blocks or 0):
                raise ResultsError(f"{where}: block: {get('block')!r} is not a block of 1..{design.blocks}")
            if any(o.block == block and o.arm == arm and o.measure == measure for o in out):
                raise ResultsError(f"{where}: block {block} has a second row for arm {arm!r}")
        failed = get("failed_requests")
        if failed and not failed.isdigit():
            raise ResultsError(f"{where}: failed_requests: {failed!r} is not a whole number")
        digest = get("prompt_ids_sha256")
        if digest and not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise ResultsError(f"{where}: prompt_ids_sha256: {digest[:20]!r} is not a sha256 (64 hex digits)")
        rows.append(
            (number, get("seal"), _row_text(start, block, arm, value, measure, int(failed) if failed else None, digest))
        )
        out.append(
            Observation(
                start=start,
                block=block,
                arm=arm,
                value=value,
                measure=measure,
                failed_requests=int(failed) if failed else None,
                prompt_hashes={ALL_PROMPTS: digest} if "prompt_ids_sha256" in columns else None,
            )
        )
    # one value per start and measure (a criteria design has a row per criterion's measure of each start)
    seen: set[tuple[int, str]] = set()
    for o in out:
        if not o.start or o.measure.startswith(("check:", "fidelity:", "fidelity_floor:")):
            continue
        if design.kind != "external" and (o.start, o.measure) in seen:
            what = f"start {o.start}" + (f", measure {o.measure}" if o.measure else "")
            raise ResultsError(f"{path}: start_order: {what} appears twice")
        seen.add((o.start, o.measure))
    provenance = results_provenance(text)
    if any(key in provenance for key in ("run", "design", "design-sha256")):
        _check_seals(path, design, provenance, rows, header_no)
        _compare_with_journal(path, design, provenance, out, [n for n, _, _ in rows])
    return out


def _check_seals(
    path: Path, design: Design, provenance: dict[str, tuple[int, str]], rows: list[tuple[int, str, str]], header: int
) -> None:
    """An exported run's rows hold the values their seals cover, none cut, added or moved."""
    if "values-seal" not in provenance or any(not stated for _, stated, _ in rows):
        missing = next((n for n, stated, _ in rows if not stated), header)
        raise ResultsError(
            f"{path}:{missing}: seal: an exported run's rows are sealed and this one is not (exported by an older "
            f"frank, or the column was removed): export it again with `frank experiment report RUN --csv`"
        )
    broken = seal.first_broken(design.sha256, [r for _, _, r in rows], [s for _, s, _ in rows])
    if broken is not None:
        raise ResultsError(
            f"{path}:{rows[broken][0]}: value: this row's values are not the ones its seal covers (edited after "
            f"export), or a row before it was removed or moved"
        )
    line, last = provenance["values-seal"]
    if rows and last != rows[-1][1]:
        raise ResultsError(f"{path}:{line}: values-seal: is not the last row's seal: rows were cut or added")


def _compare_with_journal(
    path: Path, design: Design, provenance: dict[str, tuple[int, str]], obs: list[Observation], lines: list[int]
) -> None:
    """Where the exported run is registered here, its journal is the source: each start's value must be it."""
    from frank.experiments import registry

    run_id = provenance.get("run", (0, ""))[1]
    if not run_id or "/" in run_id or not (registry.experiments_dir(create=False) / run_id / "run.json").exists():
        return
    journal = {(o.start, o.measure or design.measure): o.value for o in run_observations(registry.load_run(run_id))[0]}
    for o, line in zip(obs, lines, strict=True):
        key = (o.start, o.measure or design.measure)
        if key in journal and journal[key] != o.value:
            raise ResultsError(f"{path}:{line}: value: {o.value!r} here, {journal[key]!r} in run {run_id}'s journal")


# -- a registered run's values, exported ------------------------------------------------------------


def results_csv_for_run(run: Run) -> str:
    """A registered run's values as the CSV `frank experiment analyze` reads, with its provenance in comment
    lines (run id, design name and canonical sha256, order) and what its own report decided, guards included.
    Per start it also carries what the guards compare: its failed requests and, under the prompt-IDs guard,
    one digest of its requests' prompt-ID hashes (`prompt_ids_digest`), so `analyze` checks those guards
    from the file; the others (outputs, episodes' checks) are `unchecked` there, and the run's own report
    stays the record of them."""
    report = report_for_run(run)
    obs, _, _ = run_observations(run)
    facts = report.run
    assert facts is not None  # a registered run's report
    design = run.design
    criteria = design.rule.test == "criteria"
    lines = [
        f"# frank experiment report {run.run_id} --csv: the values of a registered run, for `frank experiment analyze`",
        f"# run: {run.run_id}",
        f"# design: {design.name}",
        f"# design-sha256: {design.sha256}",
        f"# order: seed {facts.seed}, index {facts.order_index} of {facts.order_count}",
        f"# decided in the run: {report.verdict}, p = {report.p_fraction or report.p_value}",
    ]
    if report.stopped_when_decided is not None:
        lines.append(f"# {report.decision.reason}")
    lines += [f"# guard in the run: {g.name}: {g.status} ({g.detail})" for g in report.guards]
    fidelity = _fidelity_rows(obs, report.fidelity, design.rule.control)
    with_measure = criteria or bool(fidelity)
    # what the guards compare, per start: failed requests, and one digest of its requests' prompt-ID hashes
    with_failed = any(o.failed_requests is not None for o in obs)
    with_prompts = design.guards.prompt_token_ids_identical and any(o.prompt_hashes for o in obs)
    extra = (["failed_requests"] if with_failed else []) + (["prompt_ids_sha256"] if with_prompts else [])
    rows: list[tuple[list[str], str]] = []  # (the fields written, the values its seal covers)
    for o in obs:
        digest = prompt_ids_digest(o.prompt_hashes) if with_prompts else ""
        failed = o.failed_requests if with_failed else None
        measure = o.measure if with_measure else ""
        row = [str(o.start), "" if o.block is None else str(o.block), o.arm, repr(float(o.value))]
        row += [measure] if with_measure else []
        row += ["" if failed is None else str(failed)] if with_failed else []
        row += [digest] if with_prompts else []
        rows.append((row, _row_text(o.start, o.block, o.arm, o.value, measure, failed, digest)))
    blank = [""] * len(extra)
    for start, arm, value, measure in fidelity:
        text = _row_text(int(start or 0), None, arm, float(value), measure, None, "")
        rows.append(([start, "", arm, repr(float(value)), measure, *blank], text))
    seals = seal.chain(design.sha256, (text for _, text in rows))
    lines.append(f"# values-seal: {seals[-1] if seals else ''}")
    names = ["start_order", "block", "arm", "value"] + (["measure"] if with_measure else []) + extra
    lines.append(",".join([*names, "seal"]))
    lines += [",".join([*row, s]) for (row, _), s in zip(rows, seals, strict=True)]
    return "\n".join(lines) + "\n"


def _fidelity_rows(obs: list[Observation], fidelity: FidelityResult | None, control: str) -> list[tuple[str, ...]]:
    """The KL each start measured (`fidelity:SET`), and the floor the run's rule used (`fidelity_floor:SET`,
    on the control arm's row), so that `analyze` of the CSV decides the fidelity rule as the run did. With
    the control as reference, each start's KL is the one evaluated against the reference start (which has
    none); a set on which a start scored other tokens gives no rows, so the CSV cannot pass where the run
    failed."""
    rows: list[tuple[str, ...]] = []
    if fidelity is not None and fidelity["reference"] == "control":
        spoiled = {m["set"] for m in fidelity.get("mismatched", [])}
        kls = [e for e in fidelity.get("per_start", []) if e["set"] not in spoiled]
        rows += [(str(e["start"]), e["arm"], e["kl"], f"fidelity:{e['set']}") for e in kls]
    else:
        for o in obs:
            for name, cell in sorted((o.fidelity["sets"] if o.fidelity else {}).items()):
                if cell.get("kl") is not None:
                    rows.append((str(o.start), o.arm, cell["kl"], f"fidelity:{name}"))
    named = {measure.split(":", 1)[1] for *_, measure in rows}
    for row in fidelity["sets"] if fidelity is not None else []:
        if row.get("floor") is not None and row["name"] in named:
            rows.append(("", control, row["floor"], f"fidelity_floor:{row['name']}"))
    return rows
