"""Every `frank` command that takes a path, fed what a file should not be: /dev/zero (by a link), a FIFO, a
50 MB file and Latin-1 bytes. Each is refused through the bounded reader (frank.readfile): exit 1, the path
named (and for bad UTF-8, its line and byte), no traceback, no wait on the FIFO, and no file written under
FRANK_HOME. Commands run in one child process (`frank_cli`) each, as a user runs them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.test_bounded_reader import hostile

REPO = Path(__file__).resolve().parents[2]
DESIGNS = REPO / "frank" / "experiments" / "designs"
DESIGN, RESULTS = DESIGNS / "seed-schedule-2.toml", DESIGNS / "seed-schedule-2.csv"

# Latin-1 bytes at line 3 of a file of each kind (what an editor set to Latin-1 saves)
LATIN1 = {
    "toml": b'# one\n# two\nname = "caf\xe9"\n',
    "json": b'{\n "format":\n "caf\xe9"\n}\n',
    "csv": b"start_order,block,arm,value\n1,1,a,1.0\n1,1,caf\xe9,1.0\n",
    "jsonl": b'{"a": 1}\n{"a": 2}\n{"a": "caf\xe9"}\n',
}

# (command, its arguments with {P} for the hostile file or {D} for the folder that holds it, the file's
# name, its kind)
COMMANDS = [
    ("experiment register", ["experiment", "register", "{P}"], "d.toml", "toml"),
    ("experiment plan", ["experiment", "plan", "{P}", "--spread-pct", "3", "--effect-pct", "5"], "d.toml", "toml"),
    ("experiment analyze: the design", ["experiment", "analyze", "{P}", str(RESULTS)], "d.toml", "toml"),
    ("experiment analyze: the results", ["experiment", "analyze", str(DESIGN), "{P}"], "r.csv", "csv"),
    ("experiment screen", ["experiment", "screen", "{P}", "--register-only"], "s.toml", "toml"),
    ("experiment screen --report", ["experiment", "screen", "--report", "{P}"], "rec.json", "json"),
    ("campaign init", ["campaign", "init", "--file", "{P}"], "campaign.toml", "toml"),
    ("campaign status", ["campaign", "status", "--file", "{P}"], "campaign.toml", "toml"),
    ("campaign adopt", ["campaign", "adopt", "a-part", "--file", "{P}"], "campaign.toml", "toml"),
    ("fleet status", ["fleet", "status", "--fleet", "{P}"], "fleet.toml", "toml"),
    ("fleet prometheus", ["fleet", "prometheus", "--fleet", "{P}"], "fleet.toml", "toml"),
    ("episodes check", ["episodes", "check", "{P}"], "suite.toml", "toml"),
    ("fidelity sets check", ["fidelity", "sets", "check", "{D}"], "set.toml", "toml"),
    ("fidelity report", ["fidelity", "report", "{P}"], "table.json", "json"),
    ("workload check", ["workload", "check", "{D}"], "workload.toml", "toml"),
    ("workload import", ["workload", "import", "{P}", "--out", "{D}/imported"], "draw.jsonl", "jsonl"),
    ("model verify", ["model", "verify", "--dir", "{D}"], "manifest.json", "json"),
    (
        "serve --tls-cert",
        ["serve", "--allow-remote", "--listen", "127.0.0.1:8999", "--tls-cert", "{P}", "--tls-key", "{P}"],
        "cert.pem",
        "toml",  # any text: PEM
    ),
]
KINDS = {
    "dev-zero": "is a character device, not a regular file",
    "fifo": "is a FIFO (named pipe), not a regular file",
    "50MB": "is 47.7 MiB",
    "latin1": ":3: not UTF-8 text: byte ",
}


def _files(home: Path) -> set[Path]:
    return {p for p in home.rglob("*") if not p.is_dir()} if home.exists() else set()


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(("name", "argv", "file", "ext"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_command_refuses_what_is_not_a_file_it_reads(frank_cli, tmp_path, name, argv, file, ext, kind):
    home, folder = tmp_path / "home", tmp_path / "given"
    folder.mkdir()
    path = hostile(kind, folder / file, LATIN1[ext])
    before = _files(home)
    args = [a.replace("{P}", str(path)).replace("{D}", str(folder)) for a in argv]
    result = frank_cli(*args, home=home, env={"FRANK_FLEET": ""}, timeout=60)
    said = result.stdout + result.stderr
    assert result.returncode == 1, f"frank {' '.join(args)}: exit {result.returncode}\n{said[-2000:]}"
    assert "Traceback" not in said, said[-3000:]
    expected = f"{path}{KINDS[kind]}" if kind == "latin1" else f"{path}: {KINDS[kind]}"
    if kind == "50MB" and ext == "jsonl":  # a record file may be that big (whole prompts): read, refused at line 1
        expected = f"{path}:1: bad JSON"
    # a checker (`workload check`, `episodes check`, ...) lists every problem as FILE:LINE, 0 for the whole file
    assert expected in said.replace(f"{path}:0: ", f"{path}: "), said[-2000:]
    assert _files(home) == before  # nothing recorded
    assert sorted(p.name for p in folder.iterdir()) == [file]  # nothing written beside it either
    assert os.path.lexists(path)
