"""The fleet: every host of the fleet file (frank.fleet.fleetfile.default_path) read from the fleet's
Prometheus through PromQL (frank.fleet.query), once a scrape interval while the fleet screen is up, rarely
otherwise; nothing at all without a fleet file."""

from __future__ import annotations

from frank.console.messages import FleetRead
from frank.console.sources.base import Source
from frank.console.state import FleetView
from frank.errors import FrankError

UNWANTED_S = 60.0
NO_FLEET_S = 30.0


class FleetSource(Source[FleetView]):
    name = "fleet"
    _every = 5.0  # the fleet's scrape interval, once its file was read

    def message(self, view: FleetView) -> FleetRead:
        return FleetRead(view)

    def interval(self) -> float:
        if not self.wanted:
            return UNWANTED_S
        return self._every if self.last is not None and not self.last.error else NO_FLEET_S

    def read(self) -> FleetView:
        from frank.fleet.fleetfile import default_path, load_fleet
        from frank.fleet.query import fleet_status

        path = default_path()
        if not self.wanted and self.last is None:
            return FleetView(fleet_file=str(path), error="")
        try:
            fleet = load_fleet(path)
        except FrankError as exc:
            return FleetView(fleet_file=str(path), error=str(exc))
        self._every = float(fleet.scrape_interval_s)
        try:
            hosts = tuple(fleet_status(fleet))
        except FrankError as exc:
            return FleetView(str(path), fleet.prometheus_url, error=str(exc))
        return FleetView(str(path), fleet.prometheus_url, hosts)
