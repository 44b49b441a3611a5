"""embedded-cpu-swa serves a full-scale W01 prompt (over 100K tokens) with the region cache: the prompt token
IDs equal vLLM's own with the cache off, and the repeat is served from vLLM's prefix cache.

Starts its own engine (the session's shared one is embedded-cpu): about a minute and a half in all. It is a
side engine (tests/engine_starts.py): its start runs beside test_smollm2_vllm.py's.
"""

from __future__ import annotations

import os
import time

import httpx
import psutil
import pytest

from frank.engine.metrics import fetch_metrics, fetch_settled, request_delta
from frank.engine.models import tiny_model
from frank.engine.region_cache_client import RegionCacheClient
from frank.workloads.w01 import generate
from tests.engine_starts import side_engine

pytestmark = pytest.mark.engine


SWA = side_engine(
    __name__,
    "embedded-cpu-swa",
    {"region_cache": "on"},
    prepare=lambda: tiny_model.build_via_engine_venv(name=tiny_model.SWA_MODEL_NAME),  # no-op when current
)


@pytest.fixture(scope="module")
def swa_engine():
    yield SWA.ready()
    SWA.stop()


def _chat(client: httpx.Client, url: str, body: dict) -> tuple[dict, object]:
    before = fetch_metrics(client, url)
    r = client.post(f"{url}/v1/chat/completions", json=body, timeout=600)
    r.raise_for_status()
    return r.json(), request_delta(before, fetch_settled(client, url, before))


def test_a_full_scale_w01_prompt_is_served_with_identical_ids_and_prefix_cache_hits(swa_engine):
    url, token = swa_engine.status().url, swa_engine.token
    _, records = next(generate("full", seed=1))  # draw-1, generated lazily (nothing written)
    record = next(r for r in records if r["turn"] == 2)  # the system region and one tool round trip
    body = dict(
        record["body"], model="tiny-frank-swa", max_tokens=1, stream=False, return_token_ids=True, cache_salt="swa-test"
    )
    rc = RegionCacheClient(url, token or "")
    with httpx.Client() as client:
        first, cold = _chat(client, url, body)
        again, warm = _chat(client, url, body)
        assert rc.stats()["hits"] > 0 and rc.stats()["mismatches"] == 0
        rc.set_enabled(False)
        plain, _ = _chat(client, url, dict(body, cache_salt="swa-test-off"))

    ids = first["prompt_token_ids"]
    assert len(ids) > 100_000 > 64 * tiny_model.SLIDING_WINDOW
    assert ids == again["prompt_token_ids"] == plain["prompt_token_ids"]
    assert first["choices"][0]["finish_reason"] == "length" and first["usage"]["completion_tokens"] == 1
    assert cold.attributed and cold.cached_tokens == 0
    # The repeat reuses every full KV block of the prompt (sliding-window prefix caching).
    assert warm.attributed and warm.cached_tokens >= len(ids) - 2 * 128


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_vllm_processes_do_not_spin_after_a_request(swa_engine):
    """FRANK_SHM_WAIT=sleep (frank/plugins/shm_idle.py): without it the worker spins on a core for 1 s after every
    step it reads, which is half of this machine's front end."""
    status = swa_engine.status()
    vllm_procs = [p for p in psutil.Process(status.pid).children(recursive=True)]
    assert vllm_procs, "vLLM's engine core and worker run as children of the API server"
    with httpx.Client() as client:
        r = client.post(
            f"{status.url}/v1/completions",
            json={"model": "tiny-frank-swa", "prompt": "hello world", "max_tokens": 4},
            timeout=120,
        )
        r.raise_for_status()
        before = {p.pid: _cpu_seconds(p.pid) for p in vllm_procs}
        time.sleep(0.6)
        used = {pid: _cpu_seconds(pid) - cpu for pid, cpu in before.items()}
    # A spinning reader uses the whole 0.6 s; a sleeping one a few hundredths of it.
    assert max(used.values()) < 0.2, used
