"""The engine's own numbers, from vLLM's Prometheus `/metrics` endpoint.

One scrape becomes a `MetricsSample` (immutable, values summed over label sets, optionally only those of
one `model_name`). Two samples give either the values of ONE request (`request_delta`: with one request in
flight, the change of a histogram's `_sum` is that request's value when its `_count` rose by exactly 1) or
rates over a window (`window_rates`) for the dashboard.

Metric names are vLLM 0.32's (vllm/v1/metrics/loggers.py, vllm/v1/spec_decode/metrics.py). llama.cpp's
`llamacpp:*` counters are mapped onto those names where they mean the same thing (`_from_llamacpp`); what
llama.cpp does not export stays absent, and `not_available(sample)` says why (docs/measures.md). A server that is
down gives a sample with state `unreachable`, never an exception; a server that restarted (counters went
down) gives deltas that say so instead of negative numbers.
"""

from __future__ import annotations

import functools
import http.client
import math
import time
import urllib.parse
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from frank.engine import measures

# Histograms (seconds) of one finished request, all recorded in the same engine step.
TTFT = "vllm:time_to_first_token_seconds"
QUEUE = "vllm:request_queue_time_seconds"
PREFILL = "vllm:request_prefill_time_seconds"
DECODE = "vllm:request_decode_time_seconds"
INFERENCE = "vllm:request_inference_time_seconds"
E2E = "vllm:e2e_request_latency_seconds"
ITL = "vllm:inter_token_latency_seconds"  # one observation per engine step per request (= one verify step)
REQ_PROMPT_TOKENS = "vllm:request_prompt_tokens"
REQ_GENERATION_TOKENS = "vllm:request_generation_tokens"
# Counters (the exposition adds `_total`; names here are without it).
PROMPT_TOKENS = "vllm:prompt_tokens"
GENERATION_TOKENS = "vllm:generation_tokens"
PREFIX_QUERIES = "vllm:prefix_cache_queries"
PREFIX_HITS = "vllm:prefix_cache_hits"
REQUEST_SUCCESS = "vllm:request_success"
SPEC_DRAFTS = "vllm:spec_decode_num_drafts"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
SPEC_ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"  # one series per `position` label
# Gauges.
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = "vllm:kv_cache_usage_perc"

# llama.cpp's server (tools/server: server-context.cpp), counters without `_total`.
LC_PROMPT_TOKENS = "llamacpp:prompt_tokens"  # processed, EXCLUDING tokens reused from the cache
LC_PROMPT_CACHED = "llamacpp:prompt_tokens_cached"
LC_PROMPT_SECONDS = "llamacpp:prompt_seconds"
LC_PREDICTED = "llamacpp:tokens_predicted"
LC_PREDICTED_SECONDS = "llamacpp:tokens_predicted_seconds"
LC_DECODES = "llamacpp:n_decode"  # llama_decode() calls, speculative verification passes left out
LC_SPEC_DRAFTS = "llamacpp:spec_decode_num_drafts"
LC_SPEC_DRAFT_TOKENS = "llamacpp:spec_decode_num_draft_tokens"
LC_SPEC_ACCEPTED = "llamacpp:spec_decode_num_accepted_tokens"
LC_PROCESSING = "llamacpp:requests_processing"
LC_DEFERRED = "llamacpp:requests_deferred"
LLAMACPP_FAMILIES = frozenset(
    {
        LC_PROMPT_TOKENS,
        LC_PROMPT_CACHED,
        LC_PROMPT_SECONDS,
        LC_PREDICTED,
        LC_PREDICTED_SECONDS,
        LC_DECODES,
        LC_SPEC_DRAFTS,
        LC_SPEC_DRAFT_TOKENS,
        LC_SPEC_ACCEPTED,
        LC_PROCESSING,
        LC_DEFERRED,
    }
)
# Measures llama.cpp's /metrics cannot give, and why (shown instead of a value, never as 0).
LLAMACPP_NOT_EXPORTED: Mapping[str, str] = MappingProxyType(
    {
        "mean_ttft_s": "llama.cpp's /metrics has no time-to-first-token histogram (replays time TTFT on the client)",
        "mean_queue_s": "llama.cpp's /metrics has no queue-time histogram",
        "mean_prefill_s": "llama.cpp's /metrics counts no finished requests, so no per-request mean",
        "mean_front_end_s": "needs per-request TTFT, queue and prefill times, which llama.cpp's /metrics lacks",
        "requests_finished": "llama.cpp's /metrics counts no finished requests",
        "kv_cache_usage": "llama.cpp's /metrics has no KV-cache usage gauge",
        "acceptance_per_position": "llama.cpp's /metrics has no per-position acceptance counters",
    }
)

# What parse_metrics keeps by default. The prometheus_client parser costs ~30 us a line here and vLLM's
# /metrics has ~670 lines (312 of them histogram buckets we never use), so lines of other families, buckets
# and `_created` series are dropped before parsing: 9.6 ms -> ~2 ms per scrape on this 2-core box.
DEFAULT_FAMILIES = frozenset(
    {
        TTFT,
        QUEUE,
        PREFILL,
        DECODE,
        INFERENCE,
        E2E,
        ITL,
        REQ_PROMPT_TOKENS,
        REQ_GENERATION_TOKENS,
        PROMPT_TOKENS,
        GENERATION_TOKENS,
        PREFIX_QUERIES,
        PREFIX_HITS,
        REQUEST_SUCCESS,
        SPEC_DRAFTS,
        SPEC_DRAFT_TOKENS,
        SPEC_ACCEPTED,
        SPEC_ACCEPTED_PER_POS,
        RUNNING,
        WAITING,
        KV_USAGE,
        "vllm:prompt_tokens_cached",
        "vllm:num_preemptions",
        "vllm:request_time_per_output_token_seconds",
        *LLAMACPP_FAMILIES,
    }
)
_SAMPLE_SUFFIXES = ("_sum", "_count", "_total")

# Histograms whose _count must rise by exactly one for a delta to belong to one request.
_PER_REQUEST_HISTOGRAMS = (TTFT, QUEUE, PREFILL, DECODE, INFERENCE, E2E)
# Counters and histogram counts that only go up while the server lives: any decrease means a restart.
_MONOTONIC = (
    PROMPT_TOKENS,
    GENERATION_TOKENS,
    PREFIX_QUERIES,
    PREFIX_HITS,
    SPEC_DRAFTS,
    SPEC_DRAFT_TOKENS,
    SPEC_ACCEPTED,
)


def _strip_total(name: str) -> str:
    return name[:-6] if name.endswith("_total") else name


@dataclass(frozen=True)
class MetricsSample:
    """One parsed scrape of `/metrics`. `state` is ok, unreachable (connection failed) or error (HTTP/parse)."""

    taken_at: float  # time.monotonic()
    wall_time: float  # time.time()
    state: str = "ok"
    error: str | None = None
    scrape_s: float = 0.0  # how long the HTTP GET + parse took
    model_names: frozenset[str] = frozenset()
    engines: frozenset[str] = frozenset()
    # family name -> value, summed over label sets: histograms as (sum, count), counters without `_total`.
    _hists: Mapping[str, tuple[float, float]] = field(default_factory=dict, repr=False, compare=False)
    _counters: Mapping[str, float] = field(default_factory=dict, repr=False, compare=False)
    _gauges: Mapping[str, float] = field(default_factory=dict, repr=False, compare=False)
    # counters with a `position` label (per-position acceptance): name -> values by position 0, 1, ...
    _positions: Mapping[str, tuple[float, ...]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    def has(self, name: str) -> bool:
        name = _strip_total(name)
        return name in self._hists or name in self._counters or name in self._gauges

    def hist(self, name: str) -> tuple[float, float]:
        """(sum, count) of a histogram; (0, 0) when absent (see `has`)."""
        return self._hists.get(name, (0.0, 0.0))

    def counter(self, name: str) -> float | None:
        return self._counters.get(_strip_total(name))

    def gauge(self, name: str) -> float | None:
        return self._gauges.get(name)

    def per_position(self, name: str) -> tuple[float, ...]:
        """A counter kept apart by its `position` label, as values for positions 0, 1, ... (() if absent)."""
        return self._positions.get(_strip_total(name), ())

    def names(self) -> list[str]:
        return sorted({*self._hists, *self._counters, *self._gauges})

    @property
    def kind(self) -> str:
        """The engine that answered: llamacpp when its counters are there, else vllm."""
        return "llamacpp" if LC_DECODES in self._counters else "vllm"


def not_available(sample: MetricsSample) -> dict[str, str]:
    """Measures this engine's /metrics does not export -> why (empty for vLLM)."""
    return dict(LLAMACPP_NOT_EXPORTED) if sample.ok and sample.kind == "llamacpp" else {}


def _from_llamacpp(counters: dict[str, float], gauges: dict[str, float]) -> None:
    """Add frank's (vLLM-named) counters and gauges that llama.cpp's mean the same thing. vLLM counts every
    prompt token, cached or not, and its prefix-cache queries and hits in tokens: llama.cpp's processed +
    cached tokens are the former, its cached tokens the hits."""
    if LC_DECODES not in counters:
        return
    processed, cached = counters.get(LC_PROMPT_TOKENS), counters.get(LC_PROMPT_CACHED, 0.0)
    if processed is not None:
        counters[PROMPT_TOKENS] = processed + cached
        counters[PREFIX_QUERIES] = processed + cached
        counters[PREFIX_HITS] = cached
    for ours, theirs in (
        (GENERATION_TOKENS, LC_PREDICTED),
        (SPEC_DRAFTS, LC_SPEC_DRAFTS),
        (SPEC_DRAFT_TOKENS, LC_SPEC_DRAFT_TOKENS),
        (SPEC_ACCEPTED, LC_SPEC_ACCEPTED),
    ):
        if theirs in counters:
            counters[ours] = counters[theirs]
    for ours, theirs in ((RUNNING, LC_PROCESSING), (WAITING, LC_DEFERRED)):
        if theirs in gauges:
            gauges[ours] = gauges[theirs]


def unreachable(reason: str, state: str = "unreachable", scrape_s: float = 0.0) -> MetricsSample:
    return MetricsSample(time.monotonic(), time.time(), state=state, error=reason, scrape_s=scrape_s)


def _wanted(name: str, families: Collection[str] | None) -> bool:
    if name.endswith(("_bucket", "_created")):
        return False
    if families is None or name in families:
        return True
    return any(name.endswith(suf) and name[: -len(suf)] in families for suf in _SAMPLE_SUFFIXES)


def _select_lines(text: str, families: Collection[str] | None) -> str:
    """Keep the lines of the wanted families (by metric name only: the parsing is prometheus_client's)."""
    return _select_each_line(_wanted_blocks(text, families).split("\n"), families)


def _wanted_blocks(text: str, families: Collection[str] | None) -> str:
    """The text of the wanted families, whole. The exposition groups each family under its `# HELP` line,
    so a family not wanted is skipped without looking at its lines (most of vLLM's are others' buckets)."""
    if not text.startswith("# HELP ") or families is None:
        return text
    names = _wanted_names(families if isinstance(families, frozenset) else frozenset(families))
    return "".join(
        "# HELP " + block + "\n"
        for block in text[len("# HELP ") :].split("\n# HELP ")
        if block[: block.find(" ")] in names
    )


@functools.lru_cache(maxsize=4)
def _wanted_names(families: frozenset[str]) -> frozenset[str]:
    """Every name a wanted family's HELP line can carry (`_wanted` as one set lookup)."""
    return frozenset(families) | {f + suffix for f in families for suffix in _SAMPLE_SUFFIXES}


def _select_each_line(lines: list[str], families: Collection[str] | None) -> str:
    keep = []
    for line in lines:
        if line.startswith("#"):
            parts = line.split(" ", 3)
            name = parts[2] if len(parts) > 2 else ""
        else:
            name = line.split("{", 1)[0].split(" ", 1)[0]
        if name and _wanted(name, families):
            keep.append(line)
    return "\n".join(keep) + "\n" if keep else ""


def parse_metrics(
    text: str,
    model_name: str | None = None,
    *,
    engine: str | None = None,
    families: Collection[str] | None = DEFAULT_FAMILIES,
    taken_at: float | None = None,
    wall_time: float | None = None,
) -> MetricsSample:
    """Parse exposition text. With `model_name` (or `engine`, vLLM's engine index label), series labelled with
    another model (engine) are left out; series without the label, such as process metrics, are kept. `families` (names as in `hist`/`counter`/
    `gauge`) limits what is parsed, for speed; None parses everything. Raises ValueError on malformed text."""  # noqa: E501
    taken_at = time.monotonic() if taken_at is None else taken_at
    wall_time = time.time() if wall_time is None else wall_time
    frozen = families if families is None or isinstance(families, frozenset) else frozenset(families)
    fields = _parse_wanted(_wanted_blocks(text, frozen), model_name, engine, frozen)
    return MetricsSample(taken_at=taken_at, wall_time=wall_time, **fields)


@functools.lru_cache(maxsize=8)
def _parse_wanted(
    text: str, model_name: str | None, engine: str | None, families: frozenset[str] | None
) -> dict[str, Any]:
    """The sample's values from the wanted families' text. Cached: an idle engine's wanted families do not
    change between scrapes, so a 1 Hz scraper parses only when something happened (values are read-only)."""
    text = _select_each_line(text.split("\n"), families)
    hists: dict[str, list[float]] = {}
    counters: dict[str, float] = {}
    gauges: dict[str, float] = {}
    positions: dict[str, dict[int, float]] = {}
    models: set[str] = set()
    engines: set[str] = set()
    for family in text_string_to_metric_families(text):
        kind = family.type
        for s in family.samples:
            labels = s.labels
            model = labels.get("model_name")
            if model is not None:
                models.add(model)
                if model_name is not None and model != model_name:
                    continue
            eng = labels.get("engine")
            if eng is not None:
                engines.add(eng)
                if engine is not None and eng != engine:
                    continue
            value = float(s.value)
            if math.isnan(value):
                continue
            if kind == "histogram":
                if s.name.endswith("_sum"):
                    hists.setdefault(family.name, [0.0, 0.0])[0] += value
                elif s.name.endswith("_count"):
                    hists.setdefault(family.name, [0.0, 0.0])[1] += value
            elif kind == "counter" and "position" in labels:
                if s.name.endswith("_total"):
                    by_pos = positions.setdefault(family.name, {})
                    pos = int(labels["position"])
                    by_pos[pos] = by_pos.get(pos, 0.0) + value
            elif kind == "counter":
                if s.name.endswith("_total"):
                    counters[family.name] = counters.get(family.name, 0.0) + value
            elif kind == "gauge":
                gauges[family.name] = gauges.get(family.name, 0.0) + value
    _from_llamacpp(counters, gauges)
    return {
        "model_names": frozenset(models),
        "engines": frozenset(engines),
        "_hists": MappingProxyType({k: (v[0], v[1]) for k, v in hists.items()}),
        "_counters": MappingProxyType(counters),
        "_gauges": MappingProxyType(gauges),
        "_positions": MappingProxyType(
            {k: tuple(v.get(i, 0.0) for i in range(max(v) + 1)) for k, v in positions.items()}
        ),
    }


def _headers(api_key: str | None) -> dict[str, str]:
    # identity: prometheus_client's ASGI app gzips on request, and on loopback that only costs the engine CPU
    headers = {"Accept-Encoding": "identity"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


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
    try:
        resp = client.get(base_url.rstrip("/") + "/metrics", headers=_headers(api_key))
    except httpx.HTTPError as exc:
        return unreachable(
            f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, scrape_s=time.monotonic() - t0
        )
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
    try:
        resp = await client.get(base_url.rstrip("/") + "/metrics", headers=_headers(api_key))
    except httpx.HTTPError as exc:
        return unreachable(
            f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, scrape_s=time.monotonic() - t0
        )
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


def _reset_reason(before: MetricsSample, after: MetricsSample) -> str | None:
    """Why deltas between the two would be meaningless, or None."""
    if not before.ok or not after.ok:
        bad = before if not before.ok else after
        return f"{bad.state}: {bad.error}"
    for name in _MONOTONIC:
        b, a = before.counter(name), after.counter(name)
        if b is not None and a is not None and a < b:
            return f"counter reset ({name} went from {b:g} to {a:g}: server restarted)"
    for name in (*_PER_REQUEST_HISTOGRAMS, ITL):
        if after.hist(name)[1] < before.hist(name)[1]:
            return f"counter reset ({name}_count went down: server restarted)"
    return None


def _counter_delta(before: MetricsSample, after: MetricsSample, name: str) -> float | None:
    b, a = before.counter(name), after.counter(name)
    return None if b is None or a is None else a - b


def _per_position_delta(before: MetricsSample, after: MetricsSample) -> tuple[float, ...] | None:
    a = after.per_position(SPEC_ACCEPTED_PER_POS)
    if not a:
        return None
    b = before.per_position(SPEC_ACCEPTED_PER_POS)
    return tuple(x - (b[i] if i < len(b) else 0.0) for i, x in enumerate(a))


@dataclass(frozen=True)
class RequestDelta:
    """Server-side values of ONE request, from two scrapes around it (None: not measured or not present).
    The measures are frank.engine.measures' (docs/measures.md)."""

    attributed: bool
    reason: str
    ttft_s: float | None = None
    queue_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    inference_s: float | None = None
    e2e_s: float | None = None
    front_end_s: float | None = None  # measures.front_end_s: ttft - queue - prefill
    verify_steps: float | None = None  # delta spec_decode_num_drafts: DRAFTED steps only
    verify_step_s: float | None = None  # measures.time_per_verify_step: decode time / decode steps
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    acceptance_length: float | None = None  # measures.acceptance_length: 1 + accepted / drafts
    acceptance_per_position: tuple[float, ...] | None = None  # measures.per_position_acceptance
    decode_steps: float | None = None  # delta inter_token_latency count: every verify step, drafted or not
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    cached_tokens: float | None = None  # prefix-cache hits (tokens)


def request_delta(before: MetricsSample, after: MetricsSample) -> RequestDelta:
    reason = _reset_reason(before, after)
    if reason is not None:
        return RequestDelta(False, reason)
    counts = {name: after.hist(name)[1] - before.hist(name)[1] for name in _PER_REQUEST_HISTOGRAMS if after.has(name)}
    if after.kind == "llamacpp":
        return RequestDelta(False, "llama.cpp's /metrics has no per-request histograms (its response has timings)")
    if E2E not in counts:
        return RequestDelta(False, f"no {E2E} in /metrics")
    off = {name: c for name, c in counts.items() if c != 1}
    if off:
        name, c = next(iter(off.items()))
        what = "no request finished" if c == 0 else f"{c:g} requests finished"
        return RequestDelta(False, f"{what} between the scrapes ({name}_count rose by {c:g}, not 1)")

    def d(name: str) -> float | None:
        return after.hist(name)[0] - before.hist(name)[0] if name in counts else None

    ttft, queue, prefill, decode = d(TTFT), d(QUEUE), d(PREFILL), d(DECODE)
    drafts = _counter_delta(before, after, SPEC_DRAFTS)
    accepted = _counter_delta(before, after, SPEC_ACCEPTED)

    def hsum(name: str) -> float | None:
        return after.hist(name)[0] - before.hist(name)[0] if after.has(name) else None

    prompt = hsum(REQ_PROMPT_TOKENS)
    gen = hsum(REQ_GENERATION_TOKENS)
    itl_count = after.hist(ITL)[1] - before.hist(ITL)[1] if after.has(ITL) else None
    return RequestDelta(
        attributed=True,
        reason="one request finished between the scrapes",
        ttft_s=ttft,
        queue_s=queue,
        prefill_s=prefill,
        decode_s=decode,
        inference_s=d(INFERENCE),
        e2e_s=d(E2E),
        front_end_s=measures.front_end_s(ttft, queue, prefill),
        verify_steps=drafts,
        verify_step_s=measures.time_per_verify_step(decode, itl_count),
        draft_tokens=_counter_delta(before, after, SPEC_DRAFT_TOKENS),
        accepted_tokens=accepted,
        acceptance_length=measures.acceptance_length(accepted, drafts),
        acceptance_per_position=measures.per_position_acceptance(_per_position_delta(before, after), drafts),
        decode_steps=itl_count,
        prompt_tokens=prompt if prompt is not None else _counter_delta(before, after, PROMPT_TOKENS),
        generation_tokens=gen if gen is not None else _counter_delta(before, after, GENERATION_TOKENS),
        cached_tokens=_counter_delta(before, after, PREFIX_HITS),
    )


def spec_drafts_delta(before: MetricsSample, after: MetricsSample) -> float | None:
    """Drafted verify steps between two scrapes (spec_decode_num_drafts; llama.cpp's counter maps to it)."""
    return _counter_delta(before, after, SPEC_DRAFTS)


# Where a per-request value came from (a replay record's server["sources"]).
SOURCE_DELTA = "metrics-delta"  # /metrics deltas around the request (request_delta)
SOURCE_RESPONSE = "response"  # the response's own `metrics` (--enable-per-request-metrics)
SOURCE_DERIVED = "response-derived"  # computed from response values (decode steps: see response_values)
SOURCE_CLIENT = "client+response"  # the client's TTFT with the response's queue and prefill
SOURCE_TIMINGS = "llamacpp-timings"  # llama.cpp's `timings` object in its response
SOURCE_CLIENT_ONLY = "client"  # timed on the client


def timings_values(
    timings: Mapping[str, Any] | None, client_ttft_s: float | None, drafted_steps: float | None = None
) -> tuple[RequestDelta, dict[str, str]] | None:
    """A request's server values from the `timings` object llama.cpp puts in its response (the last chunk
    when streamed): prompt_n tokens computed in prompt_ms, cache_n reused from the cache, predicted_n tokens
    generated in predicted_ms (after the prompt's step), draft_n proposed and draft_n_accepted accepted draft
    tokens. Decode steps are derived as for vLLM's response (generated - 1 - accepted). llama.cpp reports no
    queue time, so front-end time (TTFT - queue - prefill) is not available; the drafted-step count is not
    in the timings either: `drafted_steps` (the change of llamacpp:spec_decode_num_drafts_total around a
    request that ran alone, `spec_drafts_delta`) supplies it."""
    if not timings or timings.get("prompt_ms") is None:
        return None
    prefill = float(timings["prompt_ms"]) / 1000.0
    decode = None if timings.get("predicted_ms") is None else float(timings["predicted_ms"]) / 1000.0
    generated = timings.get("predicted_n")
    accepted = timings.get("draft_n_accepted")
    steps = measures.llamacpp_decode_steps(generated, accepted)
    cached = timings.get("cache_n")
    values = RequestDelta(
        attributed=True,
        reason="from llama.cpp's response timings",
        ttft_s=client_ttft_s,
        prefill_s=prefill,
        decode_s=decode,
        inference_s=None if decode is None else prefill + decode,
        verify_step_s=measures.time_per_verify_step(decode, steps),
        verify_steps=drafted_steps,
        acceptance_length=measures.acceptance_length(accepted, drafted_steps),
        draft_tokens=None if timings.get("draft_n") is None else float(timings["draft_n"]),
        accepted_tokens=None if accepted is None else float(accepted),
        decode_steps=steps,
        prompt_tokens=float(timings.get("prompt_n", 0) + (cached or 0)),
        generation_tokens=None if generated is None else float(generated),
        cached_tokens=None if cached is None else float(cached),
    )
    sources = {
        k: SOURCE_TIMINGS for k, v in values.__dict__.items() if v is not None and k not in ("attributed", "reason")
    }
    sources.update(inference_s=SOURCE_DERIVED, decode_steps=SOURCE_DERIVED, verify_step_s=SOURCE_DERIVED)
    sources.update(verify_steps=SOURCE_DELTA, acceptance_length=SOURCE_DELTA)
    if client_ttft_s is not None:
        sources["ttft_s"] = SOURCE_CLIENT_ONLY
    return values, {k: v for k, v in sources.items() if getattr(values, k) is not None}


def response_values(
    metrics: Mapping[str, Any] | None,
    completion_tokens: int | None,
    prompt_tokens: int | None,
    client_ttft_s: float | None,
    reason: str = "",
) -> tuple[RequestDelta, dict[str, str]] | None:
    """A request's server values from the `metrics` object vLLM 0.32 puts in its response (the usage chunk
    when streamed) with --enable-per-request-metrics [--per-request-spec-decode-metrics summary]
    (vllm/entrypoints/generate/base/serving.py build_per_request_timing_metrics), and the source of each.

    vLLM's `time_to_first_token_ms` there is SCHEDULED -> first token, i.e. the prefill time of the
    /metrics histograms, not a TTFT from arrival; `generation_time_ms` is the decode time; `mean_itl_ms`
    is per output token. The response has no decode-step count: it is derived as output tokens - 1 -
    accepted draft tokens (each step gives 1 + accepted tokens), which undercounts when the last step's
    accepted tokens were cut at a stop or max_tokens. Front-end time uses the client's TTFT (network and
    client included). None when the response carried no timings."""
    if not metrics or metrics.get("generation_time_ms") is None:
        return None

    def sec(key: str) -> float | None:
        v = metrics.get(key)
        return None if v is None else float(v) / 1000.0

    queue, prefill, decode = sec("queue_time_ms"), sec("time_to_first_token_ms"), sec("generation_time_ms")
    spec = metrics.get("speculative_decoding") or {}
    drafts = spec.get("num_spec_steps")
    accepted = spec.get("num_accepted_draft_tokens")
    hist = spec.get("acceptance_histogram") or []
    per_pos = [float(sum(hist[i + 1 :])) for i in range(len(hist) - 1)] if hist else None
    steps = None
    if completion_tokens is not None and (accepted is not None or not spec):
        steps = float(max(completion_tokens - 1 - (accepted or 0), 0))
    sources = {
        "queue_s": SOURCE_RESPONSE,
        "prefill_s": SOURCE_RESPONSE,
        "decode_s": SOURCE_RESPONSE,
        "inference_s": SOURCE_DERIVED,
        "generation_tokens": SOURCE_RESPONSE,
        "prompt_tokens": SOURCE_RESPONSE,
    }
    if spec:
        sources.update(
            verify_steps=SOURCE_RESPONSE,
            draft_tokens=SOURCE_RESPONSE,
            accepted_tokens=SOURCE_RESPONSE,
            acceptance_length=SOURCE_DERIVED,
            acceptance_per_position=SOURCE_DERIVED,
        )
    if steps is not None:
        sources.update(decode_steps=SOURCE_DERIVED, verify_step_s=SOURCE_DERIVED)
    if client_ttft_s is not None:
        sources.update(ttft_s=SOURCE_CLIENT, front_end_s=SOURCE_CLIENT)
    values = RequestDelta(
        attributed=True,
        reason=f"from the response's own metrics ({reason})" if reason else "from the response's own metrics",
        ttft_s=client_ttft_s,
        queue_s=queue,
        prefill_s=prefill,
        decode_s=decode,
        inference_s=None if prefill is None or decode is None else prefill + decode,
        front_end_s=measures.front_end_s(client_ttft_s, queue, prefill),
        verify_steps=None if drafts is None else float(drafts),
        verify_step_s=measures.time_per_verify_step(decode, steps),
        draft_tokens=None if spec.get("num_draft_tokens") is None else float(spec["num_draft_tokens"]),
        accepted_tokens=None if accepted is None else float(accepted),
        acceptance_length=measures.acceptance_length(accepted, drafts),
        acceptance_per_position=measures.per_position_acceptance(per_pos, drafts),
        decode_steps=steps,
        prompt_tokens=None if prompt_tokens is None else float(prompt_tokens),
        generation_tokens=None if completion_tokens is None else float(completion_tokens),
    )
    return values, sources


def delta_sources(delta: RequestDelta) -> dict[str, str]:
    """Every value an attributed delta has came from /metrics."""
    skip = ("attributed", "reason")
    return (
        {k: SOURCE_DELTA for k, v in delta.__dict__.items() if k not in skip and v is not None}
        if delta.attributed
        else {}
    )


@dataclass(frozen=True)
class WindowRates:
    """Rates and means over the window between two samples (for the dashboard). `valid` False: the window
    spans a restart or an unreachable scrape, and only the gauges of `after` (if any) are set."""

    valid: bool
    reason: str
    window_s: float
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None  # 0..1
    requests_finished: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    prefix_cache_hit_rate: float | None = None  # hits / queries, tokens
    mean_ttft_s: float | None = None
    mean_queue_s: float | None = None
    mean_prefill_s: float | None = None
    mean_front_end_s: float | None = None  # measures.front_end_s of the window's means
    window_verify_step_s: float | None = None  # measures.window_verify_step_s: mean inter-token latency
    mean_acceptance_length: float | None = None  # measures.acceptance_length over the window's drafts
    draft_acceptance_rate: float | None = None  # accepted / draft tokens
    acceptance_per_position: tuple[float, ...] | None = None  # measures.per_position_acceptance, window
    prefill_tokens_per_s: float | None = None  # measures.busy_throughput: prompt tokens computed / prefill s
    decode_tokens_per_s: float | None = None  # measures.busy_throughput: generated tokens / decode seconds
    decode_steps: float | None = None  # verify steps in the window (vLLM: ITL count; llama.cpp: derived)
    not_available: Mapping[str, str] = field(default_factory=dict)  # measure -> why this engine lacks it


def _hist_mean(before: MetricsSample, after: MetricsSample, name: str) -> float | None:
    if not after.has(name):
        return None
    (s0, c0), (s1, c1) = before.hist(name), after.hist(name)
    return measures.ratio(s1 - s0, c1 - c0)


def window_rates(before: MetricsSample, after: MetricsSample) -> WindowRates:
    window = after.taken_at - before.taken_at
    gauges = dict(running=after.gauge(RUNNING), waiting=after.gauge(WAITING), kv_cache_usage=after.gauge(KV_USAGE))
    reason = _reset_reason(before, after)
    if reason is None and window <= 0:
        reason = "empty window"
    if reason is not None:
        return WindowRates(False, reason, window, **gauges, not_available=not_available(after))
    ttft, queue, prefill = (_hist_mean(before, after, n) for n in (TTFT, QUEUE, PREFILL))
    drafts = _counter_delta(before, after, SPEC_DRAFTS)
    accepted = _counter_delta(before, after, SPEC_ACCEPTED)
    prompt = _counter_delta(before, after, PROMPT_TOKENS)
    gen = _counter_delta(before, after, GENERATION_TOKENS)
    itl = (
        (after.hist(ITL)[0] - before.hist(ITL)[0], after.hist(ITL)[1] - before.hist(ITL)[1])
        if after.has(ITL)
        else (None, None)
    )
    if after.kind == "llamacpp":  # no ITL histogram: its decode seconds over the steps its tokens imply
        steps = measures.llamacpp_window_decode_steps(gen, accepted)
        itl = (_counter_delta(before, after, LC_PREDICTED_SECONDS), steps)
    return WindowRates(
        True,
        "ok",
        window,
        **gauges,
        requests_finished=after.hist(E2E)[1] - before.hist(E2E)[1] if after.has(E2E) else None,
        prompt_tokens_per_s=measures.ratio(prompt, window),
        generation_tokens_per_s=measures.ratio(gen, window),
        prefix_cache_hit_rate=measures.ratio(
            _counter_delta(before, after, PREFIX_HITS), _counter_delta(before, after, PREFIX_QUERIES)
        ),
        mean_ttft_s=ttft,
        mean_queue_s=queue,
        mean_prefill_s=prefill,
        mean_front_end_s=measures.front_end_s(ttft, queue, prefill),
        window_verify_step_s=measures.window_verify_step_s(*itl),
        mean_acceptance_length=measures.acceptance_length(accepted, drafts),
        draft_acceptance_rate=measures.draft_acceptance_rate(
            accepted, _counter_delta(before, after, SPEC_DRAFT_TOKENS)
        ),
        acceptance_per_position=measures.per_position_acceptance(_per_position_delta(before, after), drafts),
        **_busy_rates(before, after),
        decode_steps=itl[1],
        not_available=not_available(after),
    )


def _busy_rates(before: MetricsSample, after: MetricsSample | None = None) -> dict[str, float | None]:
    """Tokens per second of prefill and of decode time (not of wall time), over a window (before -> after)
    or, with one sample, over the server's life. vLLM: its prefill/decode histogram sums; llama.cpp: its
    prompt_seconds and tokens_predicted_seconds counters."""

    def d(get: Any, name: str) -> float | None:
        if after is None:
            return get(before, name)
        a, b = get(after, name), get(before, name)
        return None if a is None or b is None else a - b

    def counter(x: MetricsSample, name: str) -> float | None:
        return x.counter(name)

    def hist_sum(x: MetricsSample, name: str) -> float | None:
        return x.hist(name)[0] if x.has(name) else None

    last = after or before
    if last.kind == "llamacpp":
        computed, prefill_s = d(counter, LC_PROMPT_TOKENS), d(counter, LC_PROMPT_SECONDS)
        generated, decode_s = d(counter, LC_PREDICTED), d(counter, LC_PREDICTED_SECONDS)
    else:
        prompt, hits = d(counter, PROMPT_TOKENS), d(counter, PREFIX_HITS)
        computed = None if prompt is None else prompt - (hits or 0.0)
        prefill_s, generated, decode_s = d(hist_sum, PREFILL), d(counter, GENERATION_TOKENS), d(hist_sum, DECODE)
    return {
        "prefill_tokens_per_s": measures.busy_throughput(computed, prefill_s),
        "decode_tokens_per_s": measures.busy_throughput(generated, decode_s),
    }


def sample_summary(sample: MetricsSample) -> dict[str, float | str | None]:
    """The headline values of one scrape, as plain JSON: gauges, totals since the server started, and means
    over its whole life (rates over a window come from `window_rates`)."""
    if not sample.ok:
        return {"state": sample.state, "error": sample.error}

    def mean(name: str) -> float | None:
        return measures.ratio(*sample.hist(name))

    hits, queries = sample.counter(PREFIX_HITS), sample.counter(PREFIX_QUERIES)
    drafts, accepted = sample.counter(SPEC_DRAFTS), sample.counter(SPEC_ACCEPTED)
    ttft, queue, prefill = mean(TTFT), mean(QUEUE), mean(PREFILL)
    return {
        "state": "ok",
        "scrape_s": sample.scrape_s,
        "requests_running": sample.gauge(RUNNING),
        "requests_waiting": sample.gauge(WAITING),
        "kv_cache_usage": sample.gauge(KV_USAGE),
        "requests_finished": sample.hist(E2E)[1] if sample.has(E2E) else None,
        "prompt_tokens": sample.counter(PROMPT_TOKENS),
        "generation_tokens": sample.counter(GENERATION_TOKENS),
        "prefix_cache_hit_rate": measures.ratio(hits, queries),
        "mean_ttft_s": ttft,
        "mean_queue_s": queue,
        "mean_prefill_s": prefill,
        "mean_front_end_s": measures.front_end_s(ttft, queue, prefill),
        "window_verify_step_s": measures.window_verify_step_s(*sample.hist(ITL)) if sample.has(ITL) else None,
        "mean_acceptance_length": measures.acceptance_length(accepted, drafts),
        "acceptance_per_position": measures.per_position_acceptance(sample.per_position(SPEC_ACCEPTED_PER_POS), drafts),
        "spec_decode": sample.has(SPEC_DRAFTS),
        **_busy_rates(sample),
        "engine_kind": sample.kind,
        "not_available": not_available(sample),
    }
