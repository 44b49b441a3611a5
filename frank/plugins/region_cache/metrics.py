"""A prometheus_client Collector for the region cache's stats (frank:region_cache_* on /metrics)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from frank.plugins.region_cache import runtime

# stats key -> (series name without _total, help)
COUNTERS = {
    "requests": ("frank:region_cache_requests", "prompts encoded through the region cache"),
    "hits": ("frank:region_cache_hits", "regions found in the cache"),
    "misses": ("frank:region_cache_misses", "regions encoded and stored"),
    "hit_tokens": ("frank:region_cache_hit_tokens", "tokens served from the cache"),
    "miss_tokens": ("frank:region_cache_miss_tokens", "tokens encoded on misses"),
    "seconds_saved": ("frank:region_cache_seconds_saved", "estimated encode seconds saved by hits"),
    "verified": ("frank:region_cache_verified", "prompts re-checked against a fresh encode"),
    "mismatches": ("frank:region_cache_mismatches", "verified prompts whose cached IDs differed"),
    "fallbacks": ("frank:region_cache_fallbacks", "prompts sent to the plain tokenizer path"),
    "errors": ("frank:region_cache_errors", "errors inside the cache (each fell back)"),
    "evictions": ("frank:region_cache_evictions", "entries evicted by the LRU bounds"),
    "checks_skipped": (
        "frank:region_cache_checks_skipped",
        "prompts whose vocabulary check vLLM skipped (IDs straight from the tokenizer)",
    ),
}
GAUGES = {
    "entries": ("frank:region_cache_entries", "regions held"),
    "tokens_held": ("frank:region_cache_tokens", "token IDs held"),
    "bytes_held": ("frank:region_cache_bytes", "estimated bytes held"),
    "enabled": ("frank:region_cache_enabled", "1 when the cache is on"),
}


class RegionCacheCollector:
    def collect(self) -> Iterator[Metric]:
        stats: Mapping[str, Any] = runtime.snapshot()  # read by name from the tables above
        for key, (name, doc) in COUNTERS.items():
            yield CounterMetricFamily(name, doc, value=float(stats.get(key, 0)))
        for key, (name, doc) in GAUGES.items():
            yield GaugeMetricFamily(name, doc, value=float(stats.get(key, 0)))

    def describe(self) -> Iterator[Metric]:
        return iter(())  # no describe: collect() runs only on scrapes, never at register time
