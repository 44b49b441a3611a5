"""Engines started in a thread. A vLLM start is mostly single-threaded imports, one process after another: on
two cores, a start in a thread runs beside the tests (or beside another start) instead of before them.

- `EngineStart`: one engine; `begin` (back once its supervisor is spawned), `ready` (waits for it), `stop`.
- `side_engine(module, profile, knobs)`: the engine of a profile of its own that one test module uses, in a
  state dir of its own under the session home. When the first of them is wanted, the side engines of every
  other selected module begin too, so their starts overlap; each module stops its own at its end, and the
  session's end stops any left.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class EngineStart:
    def __init__(
        self,
        profile: str,
        knobs: dict[str, Any] | None = None,
        state_dir: Path | None = None,
        prepare: Callable[[], object] | None = None,
    ) -> None:
        self.profile, self.knobs, self.state_dir, self.prepare = profile, knobs, state_dir, prepare
        self.controller: Any = None
        self.thread: threading.Thread | None = None
        self.status: Any = None
        self.error: BaseException | None = None

    def begin(self) -> None:
        if self.thread is not None:
            return
        from frank.engine.controller import EngineController

        # state_dir None: the session home's default (resolved here, before any test moves FRANK_HOME), so CLI
        # subprocesses adopt it
        self.controller = EngineController(state_dir=self.state_dir)
        self.thread = threading.Thread(target=self._start, name=f"start-{self.profile}", daemon=True)
        self.thread.start()
        # back once the supervisor is spawned: until then the start reads the environment (profiles, the engine
        # python) and the supervisor inherits it, so that is done before a test changes it
        while self.thread.is_alive():
            record = self.controller.files.read_record()
            if record is not None and record.supervisor_pid:
                break
            time.sleep(0.05)

    def _start(self) -> None:
        try:
            if self.prepare is not None:
                self.prepare()
            self.status = self.controller.start(self.profile, self.knobs)
        except BaseException as exc:  # raised in the test that waits for it
            self.error = exc

    def ready(self) -> Any:
        """The EngineController of the started engine, once it is ready."""
        self.begin()
        assert self.thread is not None
        self.thread.join()
        if self.error is not None:
            raise self.error
        assert self.status.state == "ready", self.status
        return self.controller

    def stop(self) -> None:
        if self.thread is not None:
            self.controller.stop()  # its supervisor is spawned (`begin` waits for that): a start under way ends
            self.thread.join()
            self.thread = None


BASE: Path | None = None  # set by tests/conftest.py: the session home
_SIDE: dict[str, EngineStart] = {}  # by module name
_SELECTED: set[str] | None = None  # the modules with a selected test (None: not known yet, all)


class _SideEngine(EngineStart):
    def ready(self) -> Any:
        self.begin()
        for module, side in _SIDE.items():  # the other side engines this run needs start beside this one
            if side is not self and (_SELECTED is None or module in _SELECTED):
                side.begin()
        return super().ready()


def side_engine(
    module: str, profile: str, knobs: dict[str, Any] | None = None, prepare: Callable[[], object] | None = None
) -> EngineStart:
    """The side engine of test module `module` (called at its import)."""
    assert BASE is not None, "tests/conftest.py sets engine_starts.BASE"
    _SIDE[module] = _SideEngine(profile, knobs, BASE / "side-engines" / module.rsplit(".", 1)[-1] / "state", prepare)
    return _SIDE[module]


def select(modules: set[str]) -> None:
    global _SELECTED
    _SELECTED = modules


def stop_all() -> None:
    for side in _SIDE.values():
        side.stop()
