"""Shared fixtures. The whole session runs with FRANK_HOME in a temp dir, so no test touches the user's
files, and the integration tier shares ONE real embedded engine (a start costs about a minute).

- `engine`: a session-scoped EngineController whose embedded-cpu engine is ready; stopped at the end. Its start
  begins in a thread as soon as the run is collected and needs it, so the start overlaps the tests before the
  first one that uses it (on two cores, the engine's imports run beside the console tests).
- `fresh_frank_home`: a private FRANK_HOME for a test that must start its own engines (restart, kill -9).
- `tiny_tokenizer_json`: the tiny model's tokenizer.json text (the model built on first use).
- `job_kinds`: frank.jobs with the four job kinds registered, as the console and the CLI register them.
- `frank_cli`: runs `frank ARGS` in a child process on this tree (the one CLI runner of the tests).
At the end of the session no engine process of this session may be left: it is killed and the run fails.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests import engine_starts

REPO = Path(__file__).resolve().parent.parent
_SESSION_HOME = Path(tempfile.mkdtemp(prefix="frank-test-home-"))
os.environ["FRANK_HOME"] = str(_SESSION_HOME)
os.environ.setdefault("FRANK_MODELS", str(REPO / ".build" / "models"))
os.environ.pop("NO_COLOR", None)


def _engine_processes(basetemp: str | None = None) -> list[psutil.Process]:
    """Supervisors started from this session's homes (their spec lives under _SESSION_HOME or a tmp home)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info.get("cmdline") or []
        if "frank.engine.supervisor" in cmd and any(
            str(_SESSION_HOME) in part or (basetemp and basetemp in part) for part in cmd
        ):
            found.append(proc)
    return found


@pytest.fixture(scope="session")
def session_home() -> Path:
    return _SESSION_HOME


engine_starts.BASE = _SESSION_HOME
_SHARED = engine_starts.EngineStart("embedded-cpu")


def pytest_collection_modifyitems(config, items):
    """Every test under tests/console is marked `console`: `make test` runs those that need no engine in the
    unit tier's session (scripts/test_tiers.sh), so a console test that uses the engine must say `engine`."""
    console = REPO / "tests" / "console"
    for item in items:
        if console not in item.path.parents:
            continue
        item.add_marker(pytest.mark.console)
        if "engine" in item.fixturenames and item.get_closest_marker("engine") is None:
            raise pytest.UsageError(f"{item.nodeid} uses the engine fixture: mark it pytest.mark.engine")


def pytest_collection_finish(session):
    engine_starts.select({item.module.__name__ for item in session.items if getattr(item, "module", None)})
    if not session.config.option.collectonly and any("engine" in item.fixturenames for item in session.items):
        _SHARED.begin()


@pytest.fixture(scope="session")
def engine():
    """The shared embedded engine (real vLLM on the CPU). Tests must not stop or restart it."""
    yield _SHARED.ready()
    _SHARED.stop()


class FrankCli:
    """`frank ARGS` in a child process: this interpreter, the repo as cwd and first on PYTHONPATH (so the child
    imports this tree), FRANK_HOME as the test's environment has it unless `home` is given."""

    def __call__(
        self,
        *args: str,
        home: Path | str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 300,
        **run: Any,
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "frank.console.cli", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self._child_env(home, env),
            **run,
        )

    def popen(self, *args: str, home: Path | str | None = None, **popen: Any) -> subprocess.Popen:
        """`frank ARGS` started and not waited for (stdout piped, text)."""
        return subprocess.Popen(
            [sys.executable, "-m", "frank.console.cli", *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
            env=self._child_env(home, None),
            **popen,
        )

    @staticmethod
    def _child_env(home: Path | str | None, env: dict[str, str] | None) -> dict[str, str]:
        child = {**os.environ, **(env or {})}
        if home is not None:
            child["FRANK_HOME"] = str(home)
        child["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), child.get("PYTHONPATH")) if p)
        return child

    def json(self, *args: str, ok: tuple[int, ...] = (0,), **kw: Any) -> Any:
        """`frank ARGS --json`, its exit status one of `ok`: the parsed output."""
        result = self(*args, "--json", **kw)
        assert result.returncode in ok, f"frank {' '.join(args)}: exit {result.returncode}\n{result.stderr[-2000:]}"
        return json.loads(result.stdout)


@pytest.fixture(scope="session")
def frank_cli() -> FrankCli:
    return FrankCli()


@pytest.fixture(scope="session")
def job_kinds():
    """frank.jobs knows the kinds its callers give it: register them as the console and the CLI do."""
    from frank import jobs
    from frank.console import job_kinds

    job_kinds.install()
    return jobs


@pytest.fixture(scope="module")
def tiny_tokenizer_json() -> str:
    from frank.engine.models import tiny_model

    model_dir = tiny_model.default_dir()
    if tiny_model.check_build(model_dir) is not None:
        tiny_model.build_via_engine_venv(model_dir)
    return (model_dir / "tokenizer.json").read_text()


@pytest.fixture
def fresh_frank_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("FRANK_HOME", str(home))
    return home


def pytest_sessionfinish(session, exitstatus):
    _SHARED.stop()  # begun for tests that did not get to use it (a failure with -x, an interrupt)
    engine_starts.stop_all()
    # Only this session's tmp dirs: other pytest sessions on the machine have their own engines.
    factory = getattr(session.config, "_tmp_path_factory", None)
    basetemp = str(factory.getbasetemp()) if factory is not None and factory._basetemp is not None else None
    leftovers = _engine_processes(basetemp)
    specs = [" ".join(proc.info.get("cmdline") or [])[-160:] for proc in leftovers]
    for proc in leftovers:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if leftovers:
        print(
            f"\nERROR: tests left {len(leftovers)} engine process group(s) running; killed them:\n  "
            + "\n  ".join(specs)
        )
        session.exitstatus = 1
    shutil.rmtree(_SESSION_HOME, ignore_errors=True)
