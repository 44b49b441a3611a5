"""The fleet file (TOML, hand-edited): the hosts by name, each with its exporter's address and its Ray node
resource, and the Prometheus server's address. Read through frank.tomlfile, so a wrong field is refused
with FILE:LINE and its name.

    [prometheus]
    listen = "127.0.0.1:9090"      # where `frank fleet prometheus` serves (loopback unless named)
    scrape_interval_s = 5          # also how soon a silent host shows as down

    [ray]
    address = "127.0.0.1:6379"     # the Ray head a hosts design's runner joins (default: RAY_ADDRESS)

    [hosts.a]
    exporter = "127.0.0.1:9464"    # its `frank telemetry --export prom --host a`
    resource = "host-a"            # its `ray start --resources '{"host-a": 1}'`
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field, field_validator

from frank import paths, tomlfile
from frank.errors import FrankError

HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
ADDRESS = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$")
MAX_HOSTS = 256


class FleetError(FrankError):
    """The fleet file cannot be used (names FILE:LINE and the field)."""


def _address(value: str) -> str:
    found = ADDRESS.match(value)
    if not found or not 0 < int(found.group(2)) <= 65535:
        raise ValueError(f"expected HOST:PORT with a port 1-65535, got {value!r}")
    return value


Address = Annotated[str, AfterValidator(_address)]


class HostSchema(tomlfile.Strict):
    exporter: Address
    resource: str = Field(min_length=1, max_length=200)


class PrometheusSchema(tomlfile.Strict):
    listen: Address = "127.0.0.1:9090"
    scrape_interval_s: int = Field(default=5, ge=1, le=3600)


class RaySchema(tomlfile.Strict):
    address: str = ""


class FleetSchema(tomlfile.Strict):
    prometheus: PrometheusSchema = PrometheusSchema()
    ray: RaySchema = RaySchema()
    hosts: dict[str, HostSchema] = Field(min_length=1, max_length=MAX_HOSTS)

    @field_validator("hosts")
    @classmethod
    def _names(cls, hosts: dict[str, HostSchema]) -> dict[str, HostSchema]:
        for name in hosts:
            if not HOST_NAME.match(name):
                raise ValueError(f"host name {name!r}: letters, digits, '_', '.', '-' (not first)")
        resources = [h.resource for h in hosts.values()]
        twice = sorted({r for r in resources if resources.count(r) > 1})
        if twice:
            raise ValueError(f"two hosts name the Ray resource {twice[0]!r}: a resource picks one host")
        return hosts


@dataclass(frozen=True)
class Host:
    name: str
    exporter: str  # HOST:PORT of its `frank telemetry --export prom`
    resource: str  # its Ray node's custom resource


@dataclass(frozen=True)
class Fleet:
    path: Path
    hosts: tuple[Host, ...]
    prometheus: str  # HOST:PORT of the Prometheus server
    scrape_interval_s: int
    ray_address: str  # "" : RAY_ADDRESS or Ray's own discovery

    def host(self, name: str) -> Host:
        for host in self.hosts:
            if host.name == name:
                return host
        raise FleetError(f"{self.path}: no host {name!r} (hosts: {', '.join(h.name for h in self.hosts)})")

    @property
    def prometheus_url(self) -> str:
        return f"http://{self.prometheus}"


FLEET_ENV = "FRANK_FLEET"


def default_path() -> Path:
    """FRANK_FLEET, else fleet.toml in frank's config dir."""
    override = os.environ.get(FLEET_ENV)
    return Path(override).expanduser() if override else paths.config_dir() / "fleet.toml"


def load_fleet(path: Path | str | None = None) -> Fleet:
    path = Path(path) if path is not None else default_path()
    if not path.exists():
        raise FleetError(f"{path}: no fleet file (docs/fleet.md shows one)")
    text = tomlfile.read_text(path, FleetError)
    data = tomlfile.parse(text, path, FleetError)
    lines = tomlfile.KeyLines(text)
    tomlfile.check_plain(data, path, lines, FleetError)
    schema = tomlfile.validate(FleetSchema, data, path, lines, FleetError)
    return Fleet(
        path=path,
        hosts=tuple(Host(name, h.exporter, h.resource) for name, h in schema.hosts.items()),
        prometheus=schema.prometheus.listen,
        scrape_interval_s=schema.prometheus.scrape_interval_s,
        ray_address=schema.ray.address,
    )
