"""One parsed scrape (`MetricsSample`, immutable, values summed over label sets, optionally only those of one
`model_name`): the parser, which keeps only the wanted families' lines, and llama.cpp's counters mapped onto
vLLM's names where they mean the same thing (`_from_llamacpp`); `not_available` says why a value is absent.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from prometheus_client.parser import text_string_to_metric_families

from frank.engine.metrics.names import (
    _SAMPLE_SUFFIXES,
    DEFAULT_FAMILIES,
    GENERATION_TOKENS,
    LC_DECODES,
    LC_DEFERRED,
    LC_PREDICTED,
    LC_PROCESSING,
    LC_PROMPT_CACHED,
    LC_PROMPT_TOKENS,
    LC_SPEC_ACCEPTED,
    LC_SPEC_DRAFT_TOKENS,
    LC_SPEC_DRAFTS,
    LLAMACPP_NOT_EXPORTED,
    PLUGIN_COMPATIBLE,
    PREFIX_HITS,
    PREFIX_QUERIES,
    PROMPT_TOKENS,
    RUNNING,
    SPEC_ACCEPTED,
    SPEC_DRAFT_TOKENS,
    SPEC_DRAFTS,
    WAITING,
)


def _strip_total(name: str) -> str:
    return name[:-6] if name.endswith("_total") else name


# How a scrape of /metrics went: ok, unreachable (connection failed) or error (HTTP status or parse).
ScrapeState = Literal["ok", "unreachable", "error"]
ScrapeFailure = Literal["unreachable", "error"]


@dataclass(frozen=True)
class MetricsSample:
    """One parsed scrape of `/metrics`. `state` is ok, unreachable (connection failed) or error (HTTP/parse)."""

    taken_at: float  # time.monotonic()
    wall_time: float  # time.time()
    state: ScrapeState = "ok"
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
    # frank:plugin_compatible's series: (part, the vLLM version it checked against, compatible), as exported
    plugins: tuple[tuple[str, str, bool], ...] = ()

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

    def refused_plugins(self) -> tuple[str, ...]:
        """The frank vLLM parts that stay off on this engine because its vLLM internals differ."""
        return tuple(part for part, _vllm, compatible in self.plugins if not compatible)

    def plugins_vllm(self) -> str:
        """The vLLM version the parts checked themselves against ("" when they export none)."""
        return next((vllm for _part, vllm, _ok in self.plugins if vllm), "")

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


def unreachable(reason: str, state: ScrapeFailure = "unreachable", scrape_s: float = 0.0) -> MetricsSample:
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
    plugins: list[tuple[str, str, bool]] = []
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
            elif kind == "gauge" and family.name == PLUGIN_COMPATIBLE:
                plugins.append((labels.get("part", ""), labels.get("vllm", ""), value == 1.0))
            elif kind == "gauge":
                gauges[family.name] = gauges.get(family.name, 0.0) + value
    _from_llamacpp(counters, gauges)
    return {
        "model_names": frozenset(models),
        "engines": frozenset(engines),
        "_hists": MappingProxyType({k: (v[0], v[1]) for k, v in hists.items()}),
        "_counters": MappingProxyType(counters),
        "_gauges": MappingProxyType(gauges),
        "plugins": tuple(plugins),
        "_positions": MappingProxyType(
            {k: tuple(v.get(i, 0.0) for i in range(max(v) + 1)) for k, v in positions.items()}
        ),
    }
