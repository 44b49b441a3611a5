"""Fleet actions: start (or reload) the fleet's Prometheus from the fleet file, as `frank fleet prometheus`
does; the fleet screen (7) reads the hosts from it."""

from __future__ import annotations

from frank.console.actions.base import Actions


class FleetActions(Actions):
    def prometheus(self) -> None:
        if not self.host.guard("start Prometheus"):
            return

        def start() -> str:
            from frank.fleet import prometheus
            from frank.fleet.fleetfile import load_fleet

            server = prometheus.start(load_fleet(None))  # no fleet file: its error names where it looked
            verb = "reloaded" if server.already else "started"
            return f"Prometheus {verb} at {server.url} (pid {server.pid})"

        def done(message: str) -> None:
            self.host.notify(message, title="fleet", timeout=10)
            self.host.switch_mode("fleet")

        self.in_thread("fleet", start, done)
