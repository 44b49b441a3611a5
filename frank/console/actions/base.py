"""What every action object shares: the host, and one way to run a slow call off the event loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from frank.console.host import Host


class Actions:
    def __init__(self, host: Host) -> None:
        self.host = host

    def in_thread(self, group: str, call: Callable[[], Any], then: Callable[[Any], Any] | None = None) -> None:
        """Run `call` in a thread worker (one per group at a time); `then(result)` on the event loop. A
        failure is the app's notification (FrankApp.on_worker_state_changed), never a traceback."""

        def work() -> None:
            result = call()
            if then is not None:
                self.host.call_from_thread(then, result)

        self.host.run_worker(work, name=group, group=group, thread=True, exclusive=True, exit_on_error=False)
