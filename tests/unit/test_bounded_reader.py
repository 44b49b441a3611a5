"""The one bounded reader (frank.readfile): what it refuses and how it names it, the line of a JSON field, and
an audit of the tree: every `read_text`, `read_bytes` and `open(` in frank/ goes through it, writes, or is an
exception listed below with the reason it is safe."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import pytest

from frank import readfile
from frank.errors import FrankError

REPO = Path(__file__).resolve().parents[2]


def hostile(kind: str, path: Path, text: bytes = b"") -> Path:
    """A file that is not what a reader expects: /dev/zero (by a link), a FIFO, 50 MB, or Latin-1 bytes."""
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "50MB":
        with open(path, "wb") as handle:
            handle.truncate(50_000_000)  # sparse: no disk is used
    else:
        path.write_bytes(text)
    return path


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("dev-zero", "is a character device, not a regular file"),
        ("fifo", "is a FIFO (named pipe), not a regular file"),
        ("50MB", "is 47.7 MiB; a TOML file is at most 4.0 MiB"),
    ],
)
def test_what_is_not_a_small_regular_file_is_refused_with_its_path(tmp_path, kind, says):
    path = hostile(kind, tmp_path / "x.toml")
    done: list[BaseException] = []
    reader = threading.Thread(target=lambda: done.append(_refusal(path)), daemon=True)
    reader.start()
    reader.join(10)
    assert done, "the reader is still reading (a FIFO must not wait for a writer)"
    assert str(done[0]) == f"{path}: {says}"


def _refusal(path: Path) -> BaseException:
    try:
        readfile.read_text(path, readfile.TOML)
    except FrankError as exc:
        return exc
    raise AssertionError("read")


def test_a_directory_and_a_missing_file_are_named(tmp_path):
    with pytest.raises(FrankError, match=rf"^{tmp_path}: is a directory, not a regular file$"):
        readfile.read_bytes(tmp_path, readfile.JSON)
    with pytest.raises(FrankError, match=rf"^{tmp_path}/no: no such file$"):
        readfile.read_bytes(tmp_path / "no", readfile.JSON)
    assert readfile.read_bytes_if(tmp_path / "no", readfile.JSON) is None


def test_latin1_bytes_are_refused_at_their_line_and_byte(tmp_path):
    path = hostile("latin1", tmp_path / "x.toml", b'a = 1\nb = 2\nname = "caf\xe9"\n')
    with pytest.raises(readfile.ReadError) as err:
        readfile.read_text(path, readfile.TOML)
    assert str(err.value) == (
        f"{path}:3: not UTF-8 text: byte 12 of the line (byte 24 of the file) is 0xe9 (invalid continuation byte)"
    )
    assert (err.value.path, err.value.line) == (str(path), 3)  # apart, for the checkers that list problems


def test_a_link_to_a_regular_file_reads_and_the_callers_error_is_raised(tmp_path):
    (tmp_path / "real.toml").write_text("a = 1\n")
    (tmp_path / "link.toml").symlink_to(tmp_path / "real.toml")
    assert readfile.read_text(tmp_path / "link.toml", readfile.TOML) == "a = 1\n"

    class Mine(FrankError):
        pass

    with pytest.raises(Mine):
        readfile.read_text(tmp_path / "none", readfile.TOML, Mine)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{\n "a": 1,\n "b": NaN\n}', ":3: b: NaN is not a JSON number"),
        ('{\n "a": [1,\n  {"c": -Infinity}]\n}', ":3: a[1].c: -Infinity is not a JSON number"),
        ("NaN", ":1: NaN is not a JSON number"),
        ('{\n "a": 1,\n "b": \n}', ":4: not JSON: Expecting value (column 1)"),
        ("[" * 100_000, ": not JSON frank reads: nested too deep"),
    ],
)
def test_json_that_is_not_json_is_refused_at_its_line(tmp_path, text, message):
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(FrankError) as err:
        readfile.read_json(path)
    assert str(err.value) == f"{path}{message}"


def test_a_json_record_that_is_not_an_object_is_refused(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("[1, 2]")
    with pytest.raises(FrankError, match=r":1: expected a JSON object, got a JSON list$"):
        readfile.read_object(path)


def test_json_lines_finds_the_line_of_every_field():
    data = {"cells": [{"value": 1.5, "seal": "ab"}, {"value": None}], "pick": "x", "e": {}, "l": []}
    text = json.dumps(data, indent=1)
    lines = readfile.json_lines(text)
    rows = text.splitlines()
    assert rows[lines[("cells", 1, "value")] - 1].strip() == '"value": null'
    assert rows[lines[("cells", 0, "seal")] - 1].strip() == '"seal": "ab"'
    assert rows[lines[("pick",)] - 1].strip() == '"pick": "x",'
    assert readfile.json_line(lines, ("cells", 1, "absent")) == lines[("cells", 1)]
    assert readfile.json_lines(json.dumps(data))[("cells", 1, "value")] == 1  # one line: line 1
    assert readfile.json_lines("{not json") == {}


# -- the audit -------------------------------------------------------------------------------------------

READS = re.compile(r"read_text|read_bytes|open\(")
# calls that go through the bounded reader, writers, and what only looks like a read
THROUGH = re.compile(
    r"readfile\.read_(text|bytes|bytes_if|json|object)\(|tomlfile\.read_text\(|def read_(text|bytes)\(|"
    r"os\.open\(.*O_(WRONLY|RDWR|CREAT|APPEND|DIRECTORY)|\bopen\(.*\"[wa]b?\"|os\.fdopen\(|Popen\(|"
    r"def open\(self\)|self\.open\(\)|`open\(\)`"
)
# path (a folder ends with /) -> why its reads are safe without the bounded reader
EXCEPTIONS = {
    "frank/readfile.py": "the bounded reader itself",
    "frank/episodes/suites/": "a suite's task programs (references, adversarial attempts, graders): they run inside "
    "the sandbox on an agent's workspace, not in frank",
    "frank/episodes/judge.py": "the graders' own reader of an agent's workspace, bounded itself (O_NOFOLLOW, "
    "O_NONBLOCK, a size limit), run in the sandbox; and the hidden answer frank wrote for the grading",
    "frank/episodes/sandbox.py": "copies a workspace by directory file descriptors (O_NOFOLLOW, O_NONBLOCK, regular "
    "files only), and reads /proc",
    "frank/episodes/inspect_harness.py": "runs in the agent venv (the standard library, inspect-ai and the sandbox "
    "only: test_layering): the spec frank wrote for it",
    "frank/telemetry/procfs.py": "the kernel's /proc files, by their fixed names",
    "frank/telemetry/expert_pool.py": "a process's /proc/PID/cmdline",
    "frank/engine/exl3/": "runs in exllamav3's python, which imports nothing of frank (an import-linter contract): "
    "sysfs, and a log named on its command line",
    "frank/plugins/compat.py": "runs inside vLLM's processes (nothing of frank outside frank.plugins): vLLM's source",
    "frank/fidelity/reference_model.py": "runs in the engine venv, on the spec frank wrote for it",
    "frank/engine/xllamacpp_server.py": "runs in the llama.cpp venv (xllamacpp and the standard library): the chat "
    "template the profile names, read once at the engine's start",
    "frank/engine/models/": "the model builders (`make test-model`, the device scripts) read checkpoints they "
    "downloaded or wrote; `model verify` goes through the bounded reader for the manifest, and hashes only "
    "what it found a regular file, 1 MiB at a time",
    "frank/fidelity/make_sets.py": "a developer's tool that rebuilds the shipped sets from their sources",
    "frank/engine/model_facts.py": "a GGUF's header: a regular file (checked first), at most MAX_KEYS keys",
    "frank/engine/exl3_checkpoint.py": "a safetensors file's header: a regular file (checked first, opened without "
    "waiting), its 8-byte length and at most MAX_HEADER bytes of JSON, never the tensors",
    "frank/jobs/lock.py": "a run's lock file: opened to flock it (and to read the holder's pid, a few bytes)",
    "frank/jobs/follow.py": "frank's own job logs, followed as they grow, read from an offset in chunks",
    "frank/console/log_follow.py": "the engine's own log in frank's private state dir, followed as it grows",
    "frank/telemetry/cpu_decode.py": "the engine's own log in frank's private state dir, followed as it grows "
    "from an offset, a bounded chunk a poll, a line over 4 KiB dropped as it streams",
    "frank/console/log_index.py": "the engine's own log, indexed by mmap and read from offsets, never whole",
    "frank/console/cli/engine_cmd.py": "`frank engine logs -f`: the engine's own log, followed as it grows",
    "frank/engine/state.py": "tail_lines: the engine's own log, at most its last MiB",
    "frank/fleet/prometheus.py": "the last lines of the Prometheus log frank started, for an error message",
}


def _excepted(path: str) -> str | None:
    for prefix, reason in EXCEPTIONS.items():
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            return reason
    return None


def test_every_reader_of_a_file_goes_through_the_bounded_reader_or_says_why_not():
    unexplained = []
    for file in sorted((REPO / "frank").rglob("*.py")):
        rel = str(file.relative_to(REPO))
        if _excepted(rel):
            continue
        for number, line in enumerate(file.read_text().splitlines(), 1):
            rest = THROUGH.sub("", line)
            if READS.search(rest) and not rest.lstrip().startswith("#"):
                unexplained.append(f"{rel}:{number}: {line.strip()}")
    assert unexplained == [], "\n".join(unexplained)


def test_each_exception_still_reads_something():
    """An exception for a file that no longer reads anything is stale: it would hide a new reader."""
    for prefix in EXCEPTIONS:
        files = [REPO / prefix] if not prefix.endswith("/") else list((REPO / prefix).rglob("*.py"))
        assert any(READS.search(THROUGH.sub("", f.read_text())) for f in files if f.exists()), prefix
