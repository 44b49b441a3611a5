"""The engine a benchmark talks to: a given URL, the running engine (frank engine status), or the embedded
one started for the benchmark and stopped at the end."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def engine_url(url: str | None = None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    from frank.engine.controller import EngineController

    controller = EngineController()
    st = controller.status()
    if st.state == "ready":
        yield st.url or ""
        return
    print("starting the embedded engine ...", file=sys.stderr)
    try:
        yield controller.start("embedded-cpu").url or ""
    finally:
        controller.stop()
