"""Scraping `/metrics` over HTTP: one GET (`fetch_metrics`, async `afetch_metrics`), a kept-alive scraper for
the sampler (`MetricsScraper`), and the wait until a finished request's histograms are recorded
(`fetch_settled`). A server that is down gives a sample with state `unreachable`, never an exception.
"""

from __future__ import annotations

import http.client
import time
import urllib.parse

import httpx

from frank.engine.metrics.names import E2E
from frank.engine.metrics.sample import MetricsSample, parse_metrics, unreachable


def _headers(api_key: str | None) -> dict[str, str]:
    # identity: prometheus_client's ASGI app gzips on request, and on loopback that only costs the engine CPU
    headers = {"Accept-Encoding": "identity"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


# A GET on a kept-alive connection that the server closed while it was idle (llama.cpp's HTTP server closes
# one after 5 s) fails with one of these when the close and the GET cross; the connection pool then opens a
# new connection, so one more try tells a dropped connection from a server that is down.
_DROPPED = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


def _failed(exc: httpx.HTTPError, t0: float) -> MetricsSample:
    return unreachable(
        f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, scrape_s=time.monotonic() - t0
    )


def _from_response(resp: httpx.Response, model_name: str | None, t0: float, wall: float) -> MetricsSample:
    if resp.status_code != 200:
        return unreachable(f"HTTP {resp.status_code} from /metrics", state="error", scrape_s=time.monotonic() - t0)
    try:
        sample = parse_metrics(resp.text, model_name, taken_at=t0, wall_time=wall)
    except ValueError as exc:
        return unreachable(f"unparsable /metrics: {exc}", state="error", scrape_s=time.monotonic() - t0)
    return _with_scrape_s(sample, time.monotonic() - t0)


def _with_scrape_s(sample: MetricsSample, scrape_s: float) -> MetricsSample:
    object.__setattr__(sample, "scrape_s", scrape_s)  # set once, before anyone else sees the sample
    return sample


def fetch_metrics(
    client: httpx.Client, base_url: str, api_key: str | None = None, model_name: str | None = None
) -> MetricsSample:
    """GET {base_url}/metrics and parse it. Never raises for a down or broken server."""
    t0, wall = time.monotonic(), time.time()
    url = base_url.rstrip("/") + "/metrics"
    try:
        try:
            resp = client.get(url, headers=_headers(api_key))
        except _DROPPED:  # a kept-alive connection the server closed as the GET went out: one new try
            resp = client.get(url, headers=_headers(api_key))
    except httpx.HTTPError as exc:
        return _failed(exc, t0)
    return _from_response(resp, model_name, t0, wall)


class MetricsScraper:
    """GET one engine's /metrics again and again over one kept-alive connection: the telemetry sampler's
    scraper. The standard library's http.client costs about a sixth of httpx's CPU per scrape, which matters
    at 1 Hz for a console that must idle cheaply. Never raises for a down or broken server; a connection the
    server closed while idle is opened again once, at once."""

    def __init__(
        self, base_url: str, api_key: str | None = None, model_name: str | None = None, timeout_s: float = 2.0
    ) -> None:
        url = urllib.parse.urlsplit(base_url)
        self.base_url, self.api_key, self.model_name = base_url, api_key, model_name
        self._path = url.path.rstrip("/") + "/metrics"
        cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        self._conn = cls(url.hostname or "127.0.0.1", url.port, timeout=timeout_s)
        self._headers = _headers(api_key)
        self._fresh = True  # the connection has not served a request yet

    def fetch(self) -> MetricsSample:
        t0, wall = time.monotonic(), time.time()
        try:
            status, body = self._get()
        except (OSError, http.client.HTTPException) as exc:
            self._conn.close()
            if self._fresh:
                return unreachable(
                    f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, scrape_s=time.monotonic() - t0
                )
            self._fresh = True  # a kept-alive connection the server dropped: one new try
            return self.fetch()
        if status != 200:
            return unreachable(f"HTTP {status} from /metrics", state="error", scrape_s=time.monotonic() - t0)
        try:
            sample = parse_metrics(body.decode("utf-8", "replace"), self.model_name, taken_at=t0, wall_time=wall)
        except ValueError as exc:
            return unreachable(f"unparsable /metrics: {exc}", state="error", scrape_s=time.monotonic() - t0)
        return _with_scrape_s(sample, time.monotonic() - t0)

    def _get(self) -> tuple[int, bytes]:
        self._conn.request("GET", self._path, headers=self._headers)
        resp = self._conn.getresponse()
        body = resp.read()
        self._fresh = resp.will_close  # a server that closes (HTTP/1.0) gets a new connection, not a retry
        if resp.will_close:
            self._conn.close()
        return resp.status, body

    def close(self) -> None:
        self._conn.close()


async def afetch_metrics(
    client: httpx.AsyncClient, base_url: str, api_key: str | None = None, model_name: str | None = None
) -> MetricsSample:
    t0, wall = time.monotonic(), time.time()
    url = base_url.rstrip("/") + "/metrics"
    try:
        try:
            resp = await client.get(url, headers=_headers(api_key))
        except _DROPPED:  # as in fetch_metrics
            resp = await client.get(url, headers=_headers(api_key))
    except httpx.HTTPError as exc:
        return _failed(exc, t0)
    return _from_response(resp, model_name, t0, wall)


def _settled(before: MetricsSample, sample: MetricsSample, expected: int) -> bool:
    if sample.ok and sample.kind == "llamacpp":
        return True  # llama.cpp counts a request's tokens before it answers; it has no e2e histogram to wait for
    return sample.ok and sample.hist(E2E)[1] - before.hist(E2E)[1] >= expected


def fetch_settled(
    client: httpx.Client,
    base_url: str,
    before: MetricsSample,
    expected: int = 1,
    api_key: str | None = None,
    model_name: str | None = None,
    timeout_s: float = 2.0,
    poll_s: float = 0.02,
) -> MetricsSample:
    """Scrape after a request finished. vLLM records a request's histograms in the engine step after it
    hands the last token to the API server, so a scrape right after the response can miss them: poll until
    the e2e count rose by `expected` (or the timeout passes; the caller's delta then says why)."""
    deadline = time.monotonic() + timeout_s
    while True:
        sample = fetch_metrics(client, base_url, api_key, model_name)
        if _settled(before, sample, expected) or time.monotonic() >= deadline or sample.state == "unreachable":
            return sample
        time.sleep(poll_s)


async def afetch_settled(
    client: httpx.AsyncClient,
    base_url: str,
    before: MetricsSample,
    expected: int = 1,
    api_key: str | None = None,
    model_name: str | None = None,
    timeout_s: float = 2.0,
    poll_s: float = 0.02,
) -> MetricsSample:
    import asyncio

    deadline = time.monotonic() + timeout_s
    while True:
        sample = await afetch_metrics(client, base_url, api_key, model_name)
        if _settled(before, sample, expected) or time.monotonic() >= deadline or sample.state == "unreachable":
            return sample
        await asyncio.sleep(poll_s)
