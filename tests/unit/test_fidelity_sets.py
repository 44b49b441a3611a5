"""Fidelity text sets: the shipped three check out and match their generator; bad sets name file:line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frank.console.cli import main
from frank.errors import FrankError
from frank.fidelity import make_sets
from frank.fidelity.sets import DEFAULT_SETS, SHIPPED, Document, check_set, load_set, resolve_set, write_set


def test_shipped_sets_check_and_are_what_the_generator_makes(tmp_path):
    assert SHIPPED == ("code", "agent", "prose", "short") and DEFAULT_SETS == SHIPPED[:3]
    for name in SHIPPED:
        text_set = load_set(resolve_set(name))
        documents = 3 * make_sets.SHORT_PER_SET if name == "short" else make_sets.DOCUMENTS
        assert text_set.name == name and len(text_set.documents) == documents
        fresh = make_sets.make(name, tmp_path)
        for child in fresh.iterdir():
            assert (text_set.path / child.name).read_bytes() == child.read_bytes(), (
                f"{name}/{child.name} differs from its generator (did frank/workloads/w01.py or frank/engine/models/tiny_corpus.py "  # noqa: E501
                f"change?): bump SETS_VERSION and run `python -m frank.fidelity.make_sets`"
            )


@pytest.fixture
def good(tmp_path: Path) -> Path:
    return write_set(
        tmp_path / "mine",
        "mine",
        "two documents",
        [Document("a", "hello world"), Document("b", "def f():\n    return 1\n")],
        max_tokens=64,
    )


def _edit_manifest(path: Path, old: str, new: str) -> None:
    manifest = path / "set.toml"
    manifest.write_text(manifest.read_text().replace(old, new))


def test_the_short_set_scores_about_two_hundred_positions():
    """Six documents that each fill max_tokens on the tiny tokenizer (frank-moe-gpu's too): 6 x 32 positions."""
    from tokenizers import Tokenizer

    from frank.engine.models import tiny_model

    short = load_set(resolve_set("short"))
    assert short.max_tokens == make_sets.SHORT_MAX_TOKENS == 33
    assert {d.id.split("-")[1] for d in short.documents} == {"code", "agent", "prose"}
    tokenizer = Tokenizer.from_file(str(tiny_model.default_dir() / "tokenizer.json"))
    lengths = [len(tokenizer.encode(d.text).ids) for d in short.documents]
    assert min(lengths) >= short.max_tokens, lengths
    assert len(short.documents) * (short.max_tokens - 1) == 192


def test_user_set_round_trips(good):
    text_set = load_set(good)
    assert [d.id for d in text_set.documents] == ["a", "b"] and text_set.max_tokens == 64


def test_bad_lines_are_named_file_line(good):
    texts = good / "texts.jsonl"
    texts.write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\nnot json\n{"id": "c", "text": ""}\n')
    _, errors = check_set(good)
    found = [str(e) for e in errors]
    assert any(s.startswith(f"{good / 'set.toml'}:6: sha256 mismatch") for s in found), found
    assert f"{texts}:2: duplicate id 'a' (first at line 1)" in found
    assert any(s.startswith(f"{texts}:3: bad JSON") for s in found)
    assert f"{texts}:4: field 'text': expected a non-empty string" in found


def test_manifest_errors_name_their_line(good):
    _edit_manifest(good, "max_tokens = 64", "max_tokens = 1")
    _edit_manifest(good, 'format = "frank-fidelity-set"', 'format = "other"\ncolour = 3')
    _, errors = check_set(good)
    found = [str(e) for e in errors]
    assert f"{good / 'set.toml'}:1: format: expected 'frank-fidelity-set', got 'other'" in found
    assert any(s.startswith(f"{good / 'set.toml'}:2: colour: unknown field") for s in found)
    assert any(s.startswith(f"{good / 'set.toml'}:9: max_tokens: expected an integer from 2") for s in found)
    with pytest.raises(FrankError, match="error"):
        load_set(good)


def test_cli_sets_check(good, capsys):
    assert main(["fidelity", "sets", "check", str(good)]) == 0
    assert "ok" in capsys.readouterr().out
    (good / "texts.jsonl").write_text('{"id": 1, "text": "x"}\n')
    assert main(["fidelity", "sets", "check", str(good)]) == 1
    err = capsys.readouterr().err
    assert f"{good / 'texts.jsonl'}:1: field 'id': expected a non-empty string, got 1" in err


def test_cli_sets_list_json(capsys):
    assert main(["fidelity", "sets", "list", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in listing["sets"]][: len(SHIPPED)] == list(SHIPPED)
    assert all(len(s["sha256"]) == 64 for s in listing["sets"])
