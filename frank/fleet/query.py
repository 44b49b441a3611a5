"""The fleet's state, read from its Prometheus through the HTTP API (`/api/v1/query`, `/api/v1/query_range`)
with PromQL: per host, whether its exporter answers (`up`), its engine's state and what it runs (the
exporter's labels), GPU utilisation and memory, PCIe traffic, the CPU-expert pool, the verify step and
tokens/s, and sparklines of recent values.

A host whose exporter stops answering reads `up == 0` at the next scrape and its series go stale at once
(Prometheus marks them), so it shows as down, without figures, within one scrape interval.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from frank.fleet.fleetfile import Fleet, FleetError
from frank.fleet.prometheus import JOB

# The figures of a host, one PromQL expression each, reduced to one value per host.
FIGURES: dict[str, str] = {
    "cpu_percent": "avg by (host) (frank_cpu_core_percent)",
    "gpu_util_percent": "avg by (host) (frank_gpu_utilization_percent)",
    "gpu_memory_used_bytes": "sum by (host) (frank_gpu_memory_used_bytes)",
    "gpu_memory_total_bytes": "sum by (host) (frank_gpu_memory_total_bytes)",
    "pcie_bytes_per_s": "sum by (host) (frank_gpu_pcie_tx_bytes_per_second + frank_gpu_pcie_rx_bytes_per_second)",
    "cpu_pool_busy_percent": "max by (host) (frank_engine_cpu_pool_busy_percent)",
    "cpu_pool_threads": "max by (host) (frank_engine_cpu_pool_threads)",
    "verify_step_s": "max by (host) (frank_engine_mean_verify_step_seconds)",
    "tokens_per_s": "sum by (host) (frank_engine_generation_tokens_per_second)",
}
# Sparklines: a host's recent values of these, from query_range.
SPARKS: dict[str, str] = {
    "tokens_per_s": FIGURES["tokens_per_s"],
    "cpu_percent": FIGURES["cpu_percent"],
}


class PromClient:
    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def _get(self, path: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        try:
            reply = httpx.get(f"{self.url}{path}", params=params, timeout=self.timeout_s)
            body = reply.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise FleetError(f"Prometheus at {self.url} did not answer: {exc}") from None
        if body.get("status") != "success":
            raise FleetError(f"Prometheus at {self.url}: {body.get('errorType')}: {body.get('error')}")
        return list(body["data"]["result"])

    def query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        """An instant vector: (labels, value) per series."""
        return [(r["metric"], float(r["value"][1])) for r in self._get("/api/v1/query", {"query": expr})]

    def query_range(
        self, expr: str, start: float, end: float, step_s: float
    ) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
        params = {"query": expr, "start": start, "end": end, "step": step_s}
        return [
            (r["metric"], [(float(t), float(v)) for t, v in r["values"]])
            for r in self._get("/api/v1/query_range", params)
        ]


@dataclass
class HostStatus:
    host: str
    exporter: str
    up: bool  # the exporter answered the last scrape
    engine: str  # stopped / starting / ready / crashed ...; "unknown" when the host does not answer
    runs: dict[str, str]  # profile, experiment, arm, part (the exporter's labels; empty values dropped)
    figures: dict[str, float | None]
    sparks: dict[str, list[float]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _by_host(rows: list[tuple[dict[str, str], float]]) -> dict[str, float]:
    return {labels.get("host", ""): value for labels, value in rows}


def fleet_status(fleet: Fleet, client: PromClient | None = None, spark_s: float = 300.0) -> list[HostStatus]:
    """Every host of the fleet file, in its order, from the fleet's Prometheus."""
    client = client or PromClient(fleet.prometheus_url)
    up = _by_host(client.query(f'up{{job="{JOB}"}}'))
    engines: dict[str, dict[str, str]] = {}
    for labels, value in client.query("frank_engine_up"):
        if value or labels.get("host", "") not in engines:
            engines[labels.get("host", "")] = labels
    figures = {name: _by_host(client.query(expr)) for name, expr in FIGURES.items()}
    end = time.time()
    step = max(1.0, float(fleet.scrape_interval_s))
    sparks = {
        name: {
            labels.get("host", ""): [v for _, v in values]
            for labels, values in client.query_range(expr, end - spark_s, end, step)
        }
        for name, expr in SPARKS.items()
    }
    out = []
    for host in fleet.hosts:
        answering = up.get(host.name) == 1.0
        labels = engines.get(host.name, {}) if answering else {}
        out.append(
            HostStatus(
                host=host.name,
                exporter=host.exporter,
                up=answering,
                engine=labels.get("state", "unknown") if answering else "not answering",
                runs={k: labels[k] for k in ("profile", "experiment", "arm", "part") if labels.get(k)},
                figures={name: values.get(host.name) if answering else None for name, values in figures.items()},
                sparks={name: values.get(host.name, []) for name, values in sparks.items()},
            )
        )
    return out
